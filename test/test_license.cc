/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The project's license: LICENSE is there, and every source file names it in an SPDX line near its top, so a
 * file copied out of the tree still says under which terms (libtool's own m4 files, copied in by libtoolize,
 * are not ours).
 */
#include "cux_test.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace cux_test;

/* The first three lines of a file, where its SPDX line belongs. */
static std::string head_of(const std::string &path)
{
    std::ifstream in(path);
    std::string line, head;
    for (int i = 0; (i < 3) && std::getline(in, line); ++i) {
        head += line + "\n";
    }
    return head;
}

TEST(license, every_source_file_has_an_spdx_line)
{
    namespace fs = std::filesystem;
    const std::string tag = "SPDX-License-Identifier: BSD-3-Clause";
    const std::vector<std::string> exts = {".c", ".h", ".cc", ".cpp", ".sh", ".py", ".m4", ".am", ".ac", ".inc", ".in"};
    std::ifstream license(source_path("LICENSE"));
    std::string first;
    ASSERT_TRUE(std::getline(license, first)) << "no LICENSE in " << source_path("");
    EXPECT_EQ("BSD 3-Clause License", first);

    int checked = 0;
    for (const char *dir : {"src", "test", "contrib", "gpu-host", "tools", "bench", "m4"}) {
        for (const auto &entry : fs::recursive_directory_iterator(source_path(dir))) {
            std::string path = entry.path().string(), ext = entry.path().extension().string();
            bool libtool_m4 = (std::string(dir) == "m4") &&
                              (entry.path().filename().string().rfind("cux_", 0) != 0);
            if (!entry.is_regular_file() || libtool_m4 || (path.find("/fuzz/corpus/") != std::string::npos) ||
                (path.find("/results/") != std::string::npos) ||
                (std::find(exts.begin(), exts.end(), ext) == exts.end())) {
                continue;
            }
            EXPECT_NE(std::string::npos, head_of(path).find(tag)) << path << " has no SPDX line in its first three";
            ++checked;
        }
    }
    for (const char *file : {"configure.ac", "Makefile.am", "autogen.sh"}) {
        EXPECT_NE(std::string::npos, head_of(source_path(file)).find(tag)) << file;
        ++checked;
    }
    EXPECT_GT(checked, 50);
}
