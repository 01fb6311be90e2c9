/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The documents a user reads first: the README stays short enough to read (at most 350 lines: how to install, run,
 * configure and trust it; the rest in docs/), and no relative link in it, HACKING.md or docs/ leads nowhere
 * (links into bench/results/ only where the tree has it: a release tarball leaves the runs out).
 */
#include "cux_test.h"

#include <filesystem>
#include <fstream>

using namespace cux_test;

TEST(docs, the_readme_is_at_most_350_lines)
{
    std::ifstream in(source_path("README.md"));
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        ++lines;
    }
    EXPECT_GT(lines, 0) << "no README.md";
    EXPECT_LE(lines, 350) << "README.md: move details to docs/";
}

TEST(docs, every_relative_link_leads_to_a_file)
{
    namespace fs = std::filesystem;
    std::vector<fs::path> docs = {source_path("README.md"), source_path("HACKING.md")};
    for (const auto &entry : fs::directory_iterator(source_path("docs"))) {
        if (entry.path().extension() == ".md") {
            docs.push_back(entry.path());
        }
    }
    int checked = 0;
    for (const auto &doc : docs) {
        std::ifstream in(doc);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        /* "](TARGET)" or "](TARGET#anchor)"; no std::regex: GCC 12 warns inside it under the sanitizers */
        for (size_t at = text.find("]("); at != std::string::npos; at = text.find("](", at + 2)) {
            size_t end = text.find_first_of(")# \n", at + 2);
            if (end == std::string::npos) {
                break;
            }
            const std::string target = text.substr(at + 2, end - at - 2);
            if (target.empty() || (target.find("://") != std::string::npos) || (target.rfind("mailto:", 0) == 0)) {
                continue;
            }
            /* a release tarball leaves the recorded runs out (make dist): their links name the repository's */
            if ((target.find("bench/results/") != std::string::npos) && !fs::exists(source_path("bench/results"))) {
                continue;
            }
            EXPECT_TRUE(fs::exists(doc.parent_path() / target)) << doc.filename().string() << ": " << target;
            ++checked;
        }
    }
    EXPECT_GT(checked, 10);
}
