//! The `remora` binary: everything lives in the library; see `cli`.

/// Counts heap allocations (feature `alloc-count`, tests only).
#[cfg(feature = "alloc-count")]
#[global_allocator]
static ALLOCATOR: remora::base::alloccount::Counting = remora::base::alloccount::Counting;

fn main() {
    std::process::exit(remora::launch::cli::main());
}
