//! For tests: how large the future a function returns is, without calling it. A task holds its
//! future whole for as long as it lives, so the tasks that live long (a live reply, a page
//! following it, a client's connection) are weighed by tests that keep them small.

/// The size of the future `make` returns; `make` is never called. Pass the function's
/// arguments as one tuple: `future_size(|(a, b)| f(a, b))`.
pub(crate) fn future_size<Args, F: std::future::Future>(_make: impl FnOnce(Args) -> F) -> usize {
    std::mem::size_of::<F>()
}
