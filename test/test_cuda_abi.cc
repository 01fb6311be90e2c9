/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issue 49: the module needs no CUDA toolkit to build; it declares the driver's API itself (src/driver/cux_cuda.h).
 * Where a CUDA 13 toolkit is installed (CI's machine has one), that declaration is held to the toolkit's cuda.h and
 * cudaTypedefs.h: every size, field offset and size, constant, and entry point's signature (test/abi/).
 */
#include <gtest/gtest.h>

#include <cstring>
#include <string>

extern "C" {
#include "abi/cux_cuda_abi_list.h"
extern const cux_abi_entry_t cux_abi_ours[];
#if CUX_TEST_HAVE_CUDA_TOOLKIT
extern const cux_abi_entry_t cux_abi_toolkit[];
extern const cux_abi_entry_t cux_abi_toolkit_entry_points[];
#endif
}

TEST(cuda_abi, the_drivers_declarations_are_the_toolkits)
{
#if !CUX_TEST_HAVE_CUDA_TOOLKIT
    GTEST_SKIP() << "no CUDA 13 toolkit here (configure found none): src/driver/cux_cuda.h is held to one where one "
                    "is installed";
#else
    size_t checked = 0;
    for (const cux_abi_entry_t *ours = cux_abi_ours; ours->name != nullptr; ++ours, ++checked) {
        const cux_abi_entry_t *theirs = cux_abi_toolkit;
        while ((theirs->name != nullptr) && (strcmp(theirs->name, ours->name) != 0)) {
            ++theirs;
        }
        ASSERT_NE(nullptr, theirs->name) << ours->name;
        EXPECT_EQ(theirs->value, ours->value) << ours->name << ": ours against the toolkit's";
    }
    for (const cux_abi_entry_t *entry = cux_abi_toolkit_entry_points; entry->name != nullptr; ++entry, ++checked) {
        EXPECT_TRUE(entry->value) << entry->name << ": another signature than the toolkit's";
    }
    EXPECT_GT(checked, 300u);
    std::cout << checked << " sizes, offsets, values and signatures compared with the toolkit's\n";
#endif
}
