/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * configure: the version check against the UCX source tree and the reproduced build defines.
 */
#include "cux_test.h"

#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace cux_test;

TEST(configure, reproduces_every_build_define_of_the_installed_ucx)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    command_result info = run_command(std::string("UCX_MODULES=^cuda ") + CUX_TEST_UCX_INFO + " -b");
    ASSERT_EQ(0, info.status) << info.output;

    std::ifstream f(build_path("ucx-build/config.h"));
    std::stringstream generated;
    generated << f.rdbuf();
    ASSERT_FALSE(generated.str().empty());

    std::istringstream lines(info.output);
    std::string line;
    int checked = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("#define ", 0) != 0) {
            continue;
        }
        std::string name = line.substr(8, line.find(' ', 8) - 8);
        if ((name.rfind("PACKAGE", 0) == 0) || (name == "VERSION") || (name == "LT_OBJDIR")) {
            EXPECT_EQ(std::string::npos, generated.str().find("#define " + name + " ")) << name;
            continue;
        }
        EXPECT_NE(std::string::npos, generated.str().find(line)) << line;
        ++checked;
    }
    EXPECT_GT(checked, 50);
}

class configure_check : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (access(source_path("config.status").c_str(), F_OK) == 0) {
            GTEST_SKIP() << "the source tree is configured in place: configure refuses another build directory";
        }
        char tmpl[] = "/tmp/cux-configure-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(tmpl));
        m_dir = tmpl;
    }
    void TearDown() override
    {
        run_command("rm -rf " + m_dir);
    }

    /* A fake UCX source tree with a given version. */
    std::string fake_src(const std::string &major, const std::string &minor, const std::string &patch)
    {
        std::string src = m_dir + "/ucx-src";
        run_command("mkdir -p " + src + "/src/uct/base && touch " + src + "/src/uct/base/uct_md.h");
        std::ofstream ac(src + "/configure.ac");
        ac << "define([ucx_ver_major], " << major << ")\n"
           << "define([ucx_ver_minor], " << minor << ")\n"
           << "define([ucx_ver_patch], " << patch << ")\n";
        return src;
    }

    command_result configure(const std::string &args)
    {
        return run_command("cd " + m_dir + " && " + source_path("configure") + " --with-ucx=" +
                           CUX_TEST_UCX_PREFIX + " " + args);
    }

    std::string m_dir;
};

TEST_F(configure_check, refuses_source_tree_of_another_version)
{
    command_result r = configure("--with-ucx-src=" + fake_src("1", "12", "0"));
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, r.output.find("is version 1.12.0 but the installed UCX")) << r.output;
}

TEST_F(configure_check, requires_a_source_tree)
{
    command_result r = configure("");
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, r.output.find("--with-ucx-src=DIR is required")) << r.output;
}

TEST_F(configure_check, rejects_a_directory_that_is_no_ucx_tree)
{
    command_result r = configure("--with-ucx-src=" + m_dir);
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, r.output.find("is not a UCX source tree")) << r.output;
}

/* A UCX installed without ucx_info and without headers or libuct.so links, as Ubuntu's libucx0 alone: a
 * prefix holding only the run-time libraries of the installed UCX. */
class configure_without_ucx_info : public configure_check {
protected:
    void SetUp() override
    {
        configure_check::SetUp();
        if (IsSkipped()) {
            return;
        }
        CUX_SKIP_WITHOUT_UCX_TOOLS();
        m_prefix = m_dir + "/libucx0";
        std::string cmd = "mkdir -p " + m_prefix + "/lib";
        for (const char *lib : {"ucs", "uct", "ucp", "ucm"}) {
            cmd += std::string(" && ln -s ") + CUX_TEST_UCX_LIBDIR + "/lib" + lib + ".so.0 " + m_prefix + "/lib/";
        }
        ASSERT_EQ(0, run_command(cmd).status);
    }

    command_result configure_here(const std::string &args)
    {
        return run_command("cd " + m_dir + " && " + source_path("configure") + " --with-ucx=" + m_prefix +
                           " --with-ucx-src=" + CUX_TEST_UCX_SRC + " " + args + " 2>&1");
    }

    std::string generated_config()
    {
        std::ifstream f(m_dir + "/ucx-build/config.h");
        std::stringstream text;
        text << f.rdbuf();
        return text.str();
    }

    /* ucx_info -b of the real installation: the reference for what configure must find. */
    static std::string ucx_info_b()
    {
        return run_command(std::string("UCX_MODULES=^cuda ") + CUX_TEST_UCX_INFO + " -b").output;
    }

    std::string m_prefix;
};

TEST_F(configure_without_ucx_info, refuses_to_guess_the_build_defines)
{
    command_result r = configure_here("");
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, r.output.find("has no bin/ucx_info")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("--with-ucx-build-config=detect")) << r.output;
    /* the version still comes from the libraries */
    EXPECT_NE(std::string::npos, r.output.find("installed UCX version... " CUX_TEST_UCX_VERSION)) << r.output;
}

TEST_F(configure_without_ucx_info, takes_the_build_defines_from_a_saved_ucx_info)
{
    std::string saved = m_dir + "/ucx_info-b.txt";
    std::ofstream(saved) << ucx_info_b();
    command_result r = configure_here("--with-ucx-build-config=" + saved);
    ASSERT_EQ(0, r.status) << r.output;
    std::string generated = generated_config();
    std::istringstream lines(ucx_info_b());
    std::string line;
    while (std::getline(lines, line)) {
        if ((line.rfind("#define ", 0) == 0) && (line.find("PACKAGE") == std::string::npos) &&
            (line.find(" VERSION ") == std::string::npos) && (line.find("LT_OBJDIR") == std::string::npos)) {
            EXPECT_NE(std::string::npos, generated.find(line)) << line;
        }
    }
}

TEST_F(configure_without_ucx_info, rejects_a_file_that_is_no_ucx_info_output)
{
    std::string bogus = m_dir + "/bogus.txt";
    std::ofstream(bogus) << "#define SOMETHING 1\n";
    command_result r = configure_here("--with-ucx-build-config=" + bogus);
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, r.output.find("is not the output of ucx_info -b")) << r.output;
}

/* Detection must agree with ucx_info -b on every define of UCX's headers that this UCX build sets. */
TEST_F(configure_without_ucx_info, detects_what_ucx_info_reports)
{
    command_result r = configure_here("--with-ucx-build-config=detect");
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("detected in libucs.so.0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("assumed (UCX's configure defaults")) << r.output;
    std::string generated = generated_config();
    std::string reference = ucx_info_b();
    auto value = [](const std::string &text, const std::string &name) {
        std::istringstream lines(text);
        std::string line;
        while (std::getline(lines, line)) {
            std::istringstream words(line);
            std::string hash, define, val;
            words >> hash >> define >> val;
            if ((hash == "#define") && (define == name)) {
                return val.empty() ? std::string("(empty)") : val;
            }
        }
        return std::string("(not defined)");
    };
    for (const char *name : {"ENABLE_STATS", "HAVE_CACHE_LINE_SIZE", "ENABLE_PARAMS_CHECK",
                             "ENABLE_BUILTIN_MEMCPY", "HAVE_ALLOCA_H", "HAVE_CPU_SET_T", "NVALGRIND"}) {
        EXPECT_EQ(value(reference, name), value(generated, name)) << name;
    }
    /* a distribution's build may set these otherwise (Debian 13's has profiling and trace logging); they change
     * checks, log lines and profiling calls in inline code (HAVE_PROFILING picks ucs/profile/profile_on.h or
     * profile_off.h), not layouts */
    for (const char *name : {"ENABLE_ASSERT", "UCS_MAX_LOG_LEVEL", "HAVE_PROFILING"}) {
        if (value(reference, name) != value(generated, name)) {
            std::cout << "note: " << name << " assumed " << value(generated, name) << ", this build has "
                      << value(reference, name) << std::endl;
        }
    }
}
