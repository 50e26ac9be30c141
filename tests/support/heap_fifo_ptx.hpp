// Kernels that use the device heap and the printf FIFO, as PTX (what nvcc 13.0 writes for sm_90 from the
// sources below, one module each), so the reservation probe can find when the driver reserves them.
//   heap_user(int* out, int n): void* p = malloc(n); out[threadIdx.x] = p != nullptr; free(p);
//   fifo_user(int* out, int n): if (n == 12345) printf("n=%d\n", n); out[threadIdx.x] = n;
#pragma once

namespace cumemaudit::program {

inline constexpr const char* kHeapUserPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64
.extern .func  (.param .b64 func_retval0) malloc
(
	.param .b64 malloc_param_0
)
;
.extern .func free
(
	.param .b64 free_param_0
)
;
.visible .entry heap_user(
	.param .u64 heap_user_param_0,
	.param .u32 heap_user_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<7>;


	ld.param.u64 	%rd1, [heap_user_param_0];
	ld.param.s32 	%rd2, [heap_user_param_1];
	cvta.to.global.u64 	%rd3, %rd1;
	{ // callseq 0, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd2;
	.param .b64 retval0;
	call.uni (retval0), 
	malloc, 
	(
	param0
	);
	ld.param.b64 	%rd4, [retval0+0];
	} // callseq 0
	setp.ne.s64 	%p1, %rd4, 0;
	selp.u32 	%r1, 1, 0, %p1;
	mov.u32 	%r2, %tid.x;
	mul.wide.u32 	%rd5, %r2, 4;
	add.s64 	%rd6, %rd3, %rd5;
	st.global.u32 	[%rd6], %r1;
	{ // callseq 1, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd4;
	call.uni 
	free, 
	(
	param0
	);
	} // callseq 1
	ret;

}
)PTX";

inline constexpr const char* kFifoUserPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[6] = {110, 61, 37, 100, 10};

.visible .entry fifo_user(
	.param .u64 fifo_user_param_0,
	.param .u32 fifo_user_param_1
)
{
	.local .align 8 .b8 	__local_depot1[8];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<9>;


	mov.u64 	%SPL, __local_depot1;
	cvta.local.u64 	%SP, %SPL;
	ld.param.u64 	%rd1, [fifo_user_param_0];
	ld.param.u32 	%r1, [fifo_user_param_1];
	setp.ne.s32 	%p1, %r1, 12345;
	@%p1 bra 	$L__BB1_2;

	add.u64 	%rd2, %SP, 0;
	add.u64 	%rd3, %SPL, 0;
	mov.u32 	%r2, 12345;
	st.local.u32 	[%rd3], %r2;
	mov.u64 	%rd4, $str;
	cvta.global.u64 	%rd5, %rd4;
	{ // callseq 2, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd5;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd2;
	.param .b32 retval0;
	call.uni (retval0), 
	vprintf, 
	(
	param0, 
	param1
	);
	ld.param.b32 	%r3, [retval0+0];
	} // callseq 2

$L__BB1_2:
	mov.u32 	%r4, %tid.x;
	cvta.to.global.u64 	%rd6, %rd1;
	mul.wide.u32 	%rd7, %r4, 4;
	add.s64 	%rd8, %rd6, %rd7;
	st.global.u32 	[%rd8], %r1;
	ret;

}
)PTX";

}  // namespace cumemaudit::program
