//! The `remora` binary: everything lives in the library; see `cli`.

/// Counts heap allocations (feature `alloc-count`, tests only).
#[cfg(feature = "alloc-count")]
#[global_allocator]
static ALLOCATOR: remora::alloccount::Counting = remora::alloccount::Counting;

fn main() {
    std::process::exit(remora::cli::main());
}
