/* See mapfile.h. */
#include "engine/formats/mapfile.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAP_ALIGN ((uintptr_t)2 << 20)

static void *plain_map(int fd, size_t size)
{
    return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
}

void *rlx_map_file(int fd, size_t size)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || (uintptr_t)pg > MAP_ALIGN || size > SIZE_MAX - MAP_ALIGN - (size_t)pg)
        return plain_map(fd, size);
    const uintptr_t page = (uintptr_t)pg;
    /* reserve size + 2 MiB of address space, put the file at the first
     * aligned address in it and give back the slack on both sides; where
     * any step fails, an ordinary mapping */
    const size_t span = (size + MAP_ALIGN + page - 1) & ~(page - 1);
    void *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return plain_map(fd, size);
    const uintptr_t lo = (uintptr_t)r, hi = lo + span;
    const uintptr_t a = (lo + MAP_ALIGN - 1) & ~(MAP_ALIGN - 1);
    void *p = mmap((void *)a, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(r, span);
        return plain_map(fd, size);
    }
    const uintptr_t end = (a + size + page - 1) & ~(page - 1);
    if (a > lo)
        munmap(r, a - lo);
    if (hi > end)
        munmap((void *)end, hi - end);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
}
