/* dlsym.S -- libtessera-cuda.so's dlsym, in assembly because of how glibc answers RTLD_NEXT and RTLD_DEFAULT.
 *
 * glibc's dlsym looks at its own return address to learn which object called it: RTLD_NEXT means "the next object
 * after the caller", RTLD_DEFAULT searches the caller's scope. A C wrapper that called glibc's dlsym would make the
 * shim the caller: another preloaded library after the shim that wraps, say, open() through
 * dlsym(RTLD_NEXT, "open") would get its own open back and recurse forever. So for those two handles this code jumps
 * (not calls) into glibc's dlsym with the arguments and the return address exactly as the program left them: to
 * glibc the program called it directly. Only a lookup in a given handle, whose answer does not depend on the
 * caller, goes through C (shim_dlsym_handle, shim/resolve.c), which maps a real driver entry point to its hook.
 * C cannot express "jump with the caller's frame" portably (musttail is clang-only in the compilers Debian ships),
 * hence this file; tests/unit/test_shim.c preloads a library that wraps uname() through dlsym(RTLD_NEXT) after the
 * shim and checks it still works.
 */
#if defined(__x86_64__)
        .text
        .globl  dlsym
        .type   dlsym, @function
        .p2align 4
dlsym:
        .cfi_startproc
        endbr64
        testq   %rdi, %rdi              /* RTLD_DEFAULT is 0 */
        je      1f
        cmpq    $-1, %rdi               /* RTLD_NEXT is (void *)-1 */
        je      1f
        jmp     shim_dlsym_handle
1:      pushq   %rdi                    /* keep the arguments across the call */
        .cfi_adjust_cfa_offset 8
        pushq   %rsi
        .cfi_adjust_cfa_offset 8
        subq    $8, %rsp                /* the stack 16-byte aligned at the call */
        .cfi_adjust_cfa_offset 8
        call    shim_real_dlsym
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %rsi
        .cfi_adjust_cfa_offset -8
        popq    %rdi
        .cfi_adjust_cfa_offset -8
        testq   %rax, %rax
        je      2f
        jmp     *%rax                   /* glibc's dlsym returns straight to our caller */
2:      xorl    %eax, %eax
        ret
        .cfi_endproc
        .size   dlsym, .-dlsym

#elif defined(__aarch64__)
        .text
        .globl  dlsym
        .type   dlsym, %function
        .p2align 2
dlsym:
        .cfi_startproc
        hint    #34                     /* BTI c (a no-op on cores without BTI) */
        cbz     x0, 1f                  /* RTLD_DEFAULT is 0 */
        cmn     x0, #1                  /* RTLD_NEXT is (void *)-1 */
        b.eq    1f
        b       shim_dlsym_handle
1:      stp     x29, x30, [sp, #-32]!
        .cfi_def_cfa_offset 32
        .cfi_offset 29, -32
        .cfi_offset 30, -24
        mov     x29, sp
        stp     x0, x1, [sp, #16]       /* keep the arguments across the call */
        bl      shim_real_dlsym
        mov     x16, x0                 /* x16: an indirect branch BTI lets land on glibc's "bti c" */
        ldp     x0, x1, [sp, #16]
        ldp     x29, x30, [sp], #32     /* x30 is our caller's return address again */
        .cfi_restore 29
        .cfi_restore 30
        .cfi_def_cfa_offset 0
        cbz     x16, 2f
        br      x16                     /* glibc's dlsym returns straight to our caller */
2:      mov     x0, xzr
        ret
        .cfi_endproc
        .size   dlsym, .-dlsym

#else
#error "the dlsym trampoline is written for x86_64 and aarch64"
#endif

        .section .note.GNU-stack,"",%progbits
