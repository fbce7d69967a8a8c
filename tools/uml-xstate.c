/*
 * Preloaded into Debian's user-mode-Linux kernels by tools/uml.py (LD_PRELOAD).
 *
 * A UML kernel keeps each guest thread's floating-point registers in a buffer of its own size
 * and moves them to and from the host process that runs the thread with
 * ptrace(PTRACE_GETREGSET / PTRACE_SETREGSET, NT_X86_XSTATE). The host kernel accepts a
 * SETREGSET only with its whole XSAVE size (x86 regset.c: any other length is EFAULT), and on a
 * host whose CPU has AVX-512 or AMX that size is larger than the buffer the 5.10, 6.1 and 6.12
 * packages were built with: their first user process dies ("ptrace set fp regs failed, errno =
 * 14") and the guest panics.
 *
 * This wrapper lets such a SETREGSET through: it reads the thread's whole current state, lays
 * the kernel's shorter buffer over its beginning (the legacy area, the XSAVE header and
 * the AVX upper halves) and writes the whole state back. The components beyond the UML kernel's
 * buffer (AVX-512, AMX) keep whatever the host process last held, so guest programs must not
 * rely on them being switched between threads: tools/uml.py tells the guest's glibc not to
 * pick its AVX-512 routines.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

/* Larger than any x86 XSAVE area the host kernel reports (AMX brings it to about 11 KiB). The
 * kernel shortens iov_len to its area's size. */
#define WHOLE_MAX 65536

static unsigned char whole[WHOLE_MAX];

static long raw_ptrace(long request, long pid, void *addr, void *data)
{
    return syscall(SYS_ptrace, request, pid, addr, data);
}

long ptrace(enum __ptrace_request request, ...)
{
    va_list ap;
    va_start(ap, request);
    pid_t pid = va_arg(ap, pid_t);
    void *addr = va_arg(ap, void *);
    void *data = va_arg(ap, void *);
    va_end(ap);

    if (request == PTRACE_SETREGSET && (unsigned long)addr == NT_X86_XSTATE && data != NULL) {
        struct iovec *given = data;
        struct iovec full = {.iov_base = whole, .iov_len = sizeof whole};
        /* The UML kernel runs on one host thread: one static buffer serves every call. A
         * buffer longer than the host's area (a host CPU with fewer features than the UML
         * kernel's buffer holds) is cut to it the same way. */
        if (raw_ptrace(PTRACE_GETREGSET, pid, addr, &full) == 0 && given->iov_len != full.iov_len) {
            size_t n = given->iov_len < full.iov_len ? given->iov_len : full.iov_len;
            memcpy(whole, given->iov_base, n);
            return raw_ptrace(PTRACE_SETREGSET, pid, addr, &full);
        }
    }
    /* libc's wrapper returns the word a PEEK request read (the system call stores it at data)
     * and clears errno so that a word of -1 can be told from an error; do the same. */
    if (request == PTRACE_PEEKTEXT || request == PTRACE_PEEKDATA || request == PTRACE_PEEKUSER) {
        long word;
        if (raw_ptrace(request, pid, addr, &word) < 0)
            return -1;
        errno = 0;
        return word;
    }
    return raw_ptrace(request, pid, addr, data);
}
