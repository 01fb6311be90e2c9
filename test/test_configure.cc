/*
 * configure: the version check against the UCX source tree and the reproduced build defines.
 */
#include "cux_test.h"

#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace cux_test;

TEST(configure, reproduces_every_build_define_of_the_installed_ucx)
{
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
