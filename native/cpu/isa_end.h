// Ends the instruction-set section isa.h began: for clang, pops the target attribute isa.h pushed
// (clang rejects a push left open at the end of a file); GCC's `#pragma GCC target` needs no end.
// Include it last in every file that includes isa.h.
#if defined(__clang__) && defined(NF_ISA_TARGET)
#pragma clang attribute pop
#endif
