// Kernels with local memory, as PTX (what nvcc 13.0 writes for sm_90 from the sources below), so a program
// can load them on the real driver, which compiles them, and on the simulated one, which reads each kernel's
// local depot: the kernel stack a launch raises (docs/DRIVER.md, "Contexts, kernel stacks and launches").
//   local_heavy(int* out, int n): a loop over `volatile int buf[8192]`, 32 KiB of local memory per thread
//   local_huge(int* out, int n):  the same over `volatile int buf[16384]`, 64 KiB
//   plain(int* out):              out[threadIdx.x] = threadIdx.x, no local memory
//   empty():                      nothing (written by hand: a launch to time that touches no memory)
#pragma once

namespace cumemaudit::program {

inline constexpr const char* kLocalMemoryPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64
.visible .entry local_heavy(
	.param .u64 local_heavy_param_0,
	.param .u32 local_heavy_param_1
)
{
	.local .align 16 .b8 	__local_depot0[32768];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<6>;
	.reg .b32 	%r<39>;
	.reg .b64 	%rd<25>;
	mov.u64 	%SPL, __local_depot0;
	ld.param.u64 	%rd2, [local_heavy_param_0];
	ld.param.u32 	%r18, [local_heavy_param_1];
	add.u64 	%rd1, %SPL, 0;
	mov.u32 	%r1, %tid.x;
	setp.lt.s32 	%p1, %r18, 1;
	@%p1 bra 	$L__BB0_7;
	add.s32 	%r20, %r18, -1;
	and.b32  	%r38, %r18, 3;
	setp.lt.u32 	%p2, %r20, 3;
	mov.u32 	%r35, 0;
	@%p2 bra 	$L__BB0_4;
	add.s32 	%r33, %r1, 3;
	sub.s32 	%r4, %r38, %r18;
	mov.u32 	%r35, 0;
$L__BB0_3:
	shl.b32 	%r22, %r33, 2;
	add.s32 	%r23, %r22, -12;
	cvt.u64.u32 	%rd4, %r23;
	and.b64  	%rd5, %rd4, 32764;
	add.s64 	%rd6, %rd1, %rd5;
	st.local.u32 	[%rd6], %r35;
	add.s32 	%r24, %r22, -8;
	cvt.u64.u32 	%rd7, %r24;
	and.b64  	%rd8, %rd7, 32764;
	add.s64 	%rd9, %rd1, %rd8;
	add.s32 	%r25, %r35, 1;
	st.local.u32 	[%rd9], %r25;
	add.s32 	%r26, %r22, -4;
	cvt.u64.u32 	%rd10, %r26;
	and.b64  	%rd11, %rd10, 32764;
	add.s64 	%rd12, %rd1, %rd11;
	add.s32 	%r27, %r35, 2;
	st.local.u32 	[%rd12], %r27;
	cvt.u64.u32 	%rd13, %r22;
	and.b64  	%rd14, %rd13, 32764;
	add.s64 	%rd15, %rd1, %rd14;
	add.s32 	%r28, %r35, 3;
	st.local.u32 	[%rd15], %r28;
	add.s32 	%r33, %r33, 4;
	add.s32 	%r35, %r35, 4;
	add.s32 	%r29, %r4, %r35;
	setp.ne.s32 	%p3, %r29, 0;
	@%p3 bra 	$L__BB0_3;
$L__BB0_4:
	setp.eq.s32 	%p4, %r38, 0;
	@%p4 bra 	$L__BB0_7;
	add.s32 	%r36, %r1, %r35;
$L__BB0_6:
	.pragma "nounroll";
	shl.b32 	%r30, %r36, 2;
	cvt.u64.u32 	%rd16, %r30;
	and.b64  	%rd17, %rd16, 32764;
	add.s64 	%rd18, %rd1, %rd17;
	st.local.u32 	[%rd18], %r35;
	add.s32 	%r35, %r35, 1;
	add.s32 	%r36, %r36, 1;
	add.s32 	%r38, %r38, -1;
	setp.ne.s32 	%p5, %r38, 0;
	@%p5 bra 	$L__BB0_6;
$L__BB0_7:
	mul.lo.s32 	%r31, %r1, 28;
	cvt.u64.u32 	%rd19, %r31;
	and.b64  	%rd20, %rd19, 32764;
	add.s64 	%rd21, %rd1, %rd20;
	ld.local.u32 	%r32, [%rd21];
	cvta.to.global.u64 	%rd22, %rd2;
	mul.wide.u32 	%rd23, %r1, 4;
	add.s64 	%rd24, %rd22, %rd23;
	st.global.u32 	[%rd24], %r32;
	ret;
}
.visible .entry local_huge(
	.param .u64 local_huge_param_0,
	.param .u32 local_huge_param_1
)
{
	.local .align 16 .b8 	__local_depot1[65536];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<6>;
	.reg .b32 	%r<39>;
	.reg .b64 	%rd<25>;
	mov.u64 	%SPL, __local_depot1;
	ld.param.u64 	%rd2, [local_huge_param_0];
	ld.param.u32 	%r18, [local_huge_param_1];
	add.u64 	%rd1, %SPL, 0;
	mov.u32 	%r1, %tid.x;
	setp.lt.s32 	%p1, %r18, 1;
	@%p1 bra 	$L__BB1_7;
	add.s32 	%r20, %r18, -1;
	and.b32  	%r38, %r18, 3;
	setp.lt.u32 	%p2, %r20, 3;
	mov.u32 	%r35, 0;
	@%p2 bra 	$L__BB1_4;
	add.s32 	%r33, %r1, 3;
	sub.s32 	%r4, %r38, %r18;
	mov.u32 	%r35, 0;
$L__BB1_3:
	shl.b32 	%r22, %r33, 2;
	add.s32 	%r23, %r22, -12;
	cvt.u64.u32 	%rd4, %r23;
	and.b64  	%rd5, %rd4, 65532;
	add.s64 	%rd6, %rd1, %rd5;
	st.local.u32 	[%rd6], %r35;
	add.s32 	%r24, %r22, -8;
	cvt.u64.u32 	%rd7, %r24;
	and.b64  	%rd8, %rd7, 65532;
	add.s64 	%rd9, %rd1, %rd8;
	add.s32 	%r25, %r35, 1;
	st.local.u32 	[%rd9], %r25;
	add.s32 	%r26, %r22, -4;
	cvt.u64.u32 	%rd10, %r26;
	and.b64  	%rd11, %rd10, 65532;
	add.s64 	%rd12, %rd1, %rd11;
	add.s32 	%r27, %r35, 2;
	st.local.u32 	[%rd12], %r27;
	cvt.u64.u32 	%rd13, %r22;
	and.b64  	%rd14, %rd13, 65532;
	add.s64 	%rd15, %rd1, %rd14;
	add.s32 	%r28, %r35, 3;
	st.local.u32 	[%rd15], %r28;
	add.s32 	%r33, %r33, 4;
	add.s32 	%r35, %r35, 4;
	add.s32 	%r29, %r4, %r35;
	setp.ne.s32 	%p3, %r29, 0;
	@%p3 bra 	$L__BB1_3;
$L__BB1_4:
	setp.eq.s32 	%p4, %r38, 0;
	@%p4 bra 	$L__BB1_7;
	add.s32 	%r36, %r1, %r35;
$L__BB1_6:
	.pragma "nounroll";
	shl.b32 	%r30, %r36, 2;
	cvt.u64.u32 	%rd16, %r30;
	and.b64  	%rd17, %rd16, 65532;
	add.s64 	%rd18, %rd1, %rd17;
	st.local.u32 	[%rd18], %r35;
	add.s32 	%r35, %r35, 1;
	add.s32 	%r36, %r36, 1;
	add.s32 	%r38, %r38, -1;
	setp.ne.s32 	%p5, %r38, 0;
	@%p5 bra 	$L__BB1_6;
$L__BB1_7:
	mul.lo.s32 	%r31, %r1, 28;
	cvt.u64.u32 	%rd19, %r31;
	and.b64  	%rd20, %rd19, 65532;
	add.s64 	%rd21, %rd1, %rd20;
	ld.local.u32 	%r32, [%rd21];
	cvta.to.global.u64 	%rd22, %rd2;
	mul.wide.u32 	%rd23, %r1, 4;
	add.s64 	%rd24, %rd22, %rd23;
	st.global.u32 	[%rd24], %r32;
	ret;
}
.visible .entry plain(
	.param .u64 plain_param_0
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<5>;
	ld.param.u64 	%rd1, [plain_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r1;
	ret;
}
.visible .entry empty()
{
	ret;
}
)PTX";

}  // namespace cumemaudit::program
