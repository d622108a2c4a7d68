//! The CPU kernels on plain row-major slices: no burn types, so each can be tested against a
//! direct f64 computation and finite differences.

pub mod attention;
pub mod bf16;
pub mod cross;
pub mod head;
pub mod linear;
pub mod matmul;
pub mod rms_norm;
pub mod rows;
pub mod simd;
pub mod softmax;
pub mod swiglu;
pub mod truncation;
