/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tree's layers (HACKING.md, "The architecture in one picture"): every include of the module's own headers
 * runs down, never up or sideways, so that a newcomer can read a layer knowing only the ones beneath it.
 */
#include "cux_test.h"

#include <filesystem>
#include <fstream>
#include <map>

using namespace cux_test;

namespace {

/* The module's own headers a source file includes (#include "..."), as paths under src/. Parsed by hand: GCC 12
 * warns inside std::regex under the sanitizers' build flags. */
std::vector<std::string> own_includes(const std::filesystem::path &file)
{
    std::ifstream in(file);
    std::vector<std::string> found;
    std::string line;

    while (std::getline(in, line)) {
        size_t at = line.find_first_not_of(" \t");
        if ((at == std::string::npos) || (line[at] != '#')) {
            continue;
        }
        at = line.find_first_not_of(" \t", at + 1);
        if ((at == std::string::npos) || (line.compare(at, 7, "include") != 0)) {
            continue;
        }
        const size_t open  = line.find('"', at + 7);
        const size_t close = (open == std::string::npos) ? open : line.find('"', open + 1);
        if (close != std::string::npos) {
            found.push_back(line.substr(open + 1, close - open - 1));
        }
    }
    return found;
}

/* Every source file under src/DIR, as its path under src/. */
std::vector<std::string> sources_under(const std::string &dir)
{
    namespace fs = std::filesystem;
    const fs::path src = source_path("src");
    std::vector<std::string> files;

    for (const auto &entry : fs::recursive_directory_iterator(src / dir)) {
        const std::string ext = entry.path().extension().string();
        if (entry.is_regular_file() && ((ext == ".c") || (ext == ".h"))) {
            files.push_back(fs::relative(entry.path(), src).string());
        }
    }
    return files;
}

/* The layer a path under src/ is in: the longest prefix of it that ranks names; -1 for none (UCX's headers). */
int rank_of(const std::map<std::string, int> &ranks, const std::string &path)
{
    int rank         = -1;
    size_t best_size = 0;
    for (const auto &[prefix, r] : ranks) {
        if ((path.rfind(prefix, 0) == 0) && (prefix.size() >= best_size)) {
            rank      = r;
            best_size = prefix.size();
        }
    }
    return rank;
}

/* Checks every file under dir against ranks: an include may name its own layer or a lower one. The includes
 * checked. */
int expect_includes_run_down(const std::string &dir, const std::map<std::string, int> &ranks)
{
    int checked = 0;
    for (const std::string &file : sources_under(dir)) {
        const int from = rank_of(ranks, file);
        for (const std::string &inc : own_includes(source_path("src") + "/" + file)) {
            const int to = rank_of(ranks, inc);
            EXPECT_LE(to, from) << file << " includes " << inc << ", a layer above its own";
            ++checked;
        }
    }
    return checked;
}

} // namespace

/* cux_introspection.h, the test hooks every layer may offer, counts as the lowest. */
TEST(layers, the_modules_includes_run_from_the_transports_down_to_the_driver)
{
    const std::map<std::string, int> ranks = {
        {"compat/", 0}, {"driver/", 0}, {"base/", 1}, {"copy/", 2}, {"ipc/", 2}, {"cux_introspection.h", 0},
    };
    int checked = 0;
    for (const char *dir : {"driver", "base", "compat"}) {
        checked += expect_includes_run_down(dir, ranks);
    }
    EXPECT_GT(checked, 20);
    /* and the two transports never include each other */
    for (const auto &[dir, other] : {std::pair<std::string, std::string>{"copy", "ipc/"}, {"ipc", "copy/"}}) {
        for (const std::string &file : sources_under(dir)) {
            for (const std::string &inc : own_includes(source_path("src") + "/" + file)) {
                EXPECT_NE(0u, inc.rfind(other, 0)) << file << " includes " << inc << " of the other transport";
            }
        }
    }
}

TEST(layers, cuda_ipcs_includes_run_from_the_transport_to_import_export_channel_and_common)
{
    /* the transport (md, iface, ep, sgl, device) -> import/ (a peer's keys proven and mapped) -> export/ (this
     * process's identity and keys) -> channel/ (the socket) -> common/ (the key's format); beneath them base/ */
    const std::map<std::string, int> ranks = {
        {"compat/", 0}, {"driver/", 0}, {"base/", 1}, {"cux_introspection.h", 0}, {"ipc/common/", 2},
        {"ipc/channel/", 3}, {"ipc/export/", 4}, {"ipc/import/", 5}, {"ipc/", 6},
    };
    EXPECT_GT(expect_includes_run_down("ipc", ranks), 100);
}
