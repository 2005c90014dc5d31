//! Run-time loading of a vendor library (`dlopen`/`dlsym`): gate links
//! neither the CUDA driver nor NVML, so a `cuda` build needs no toolkit to
//! compile and starts (with a clear error) on a machine without a GPU.

use std::ffi::{c_void, CStr, CString};

use crate::BackendError;

/// A loaded shared library. Never closed: the entry points taken from it
/// stay valid for the life of the process.
pub(crate) struct Library {
    handle: *mut c_void,
    name: &'static str,
}

impl Library {
    /// Loads `name` (a soname such as `libcuda.so.1`); `why` says what it is
    /// for and `hint` how to get it, for the error.
    pub(crate) fn open(name: &'static str, why: &str, hint: &str) -> Result<Self, BackendError> {
        let c_name =
            CString::new(name).map_err(|_| BackendError::new(format!("the library name {name:?} has a NUL byte")))?;
        // SAFETY: `c_name` is a NUL-terminated string that outlives the call;
        // RTLD_NOW | RTLD_LOCAL are valid flags. Loading runs the library's
        // initialisers, which is what loading a vendor driver library means.
        let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(BackendError::new(format!("cannot load {why} `{name}`: {}", last_error())).with_hint(hint));
        }
        Ok(Library { handle, name })
    }

    /// The address of `symbol`, or an error naming it.
    pub(crate) fn symbol(&self, symbol: &str) -> Result<*mut c_void, BackendError> {
        let c_symbol = CString::new(symbol)
            .map_err(|_| BackendError::new(format!("the symbol name {symbol:?} has a NUL byte")))?;
        // SAFETY: `handle` came from a successful dlopen and is never closed;
        // `c_symbol` is NUL-terminated and outlives the call.
        let address = unsafe { libc::dlsym(self.handle, c_symbol.as_ptr()) };
        if address.is_null() {
            return Err(
                BackendError::new(format!("`{}` has no `{symbol}`: {}", self.name, last_error()))
                    .with_hint("the driver is older than gate needs: update the NVIDIA driver (check `nvidia-smi`)"),
            );
        }
        Ok(address)
    }
}

/// `dlerror()`'s message, or a generic one.
fn last_error() -> String {
    // SAFETY: dlerror takes no arguments; it returns NULL or a NUL-terminated
    // string valid until the next dl* call on this thread, copied out at once.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-NULL, so a NUL-terminated C string (see above).
    unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
}

/// Declares a table of entry points of a library and its loader: each field
/// is the C function of the symbol named beside it.
macro_rules! entry_points {
    ($(#[$doc:meta])* $table:ident { $($field:ident = $symbol:literal: fn($($arg:ty),*) -> $ret:ty;)* }) => {
        $(#[$doc])*
        #[allow(non_snake_case)]
        pub(crate) struct $table {
            $(pub(crate) $field: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl $table {
            /// Resolves every entry point of the table in `lib`.
            pub(crate) fn resolve(lib: &$crate::cuda::dl::Library) -> Result<Self, $crate::BackendError> {
                Ok($table {
                    $($field: {
                        let address = lib.symbol($symbol)?;
                        // SAFETY: `address` is the non-NULL address of the C
                        // function `$symbol`, whose prototype in the vendor's
                        // header is the signature written beside it here.
                        unsafe {
                            std::mem::transmute::<*mut std::ffi::c_void, unsafe extern "C" fn($($arg),*) -> $ret>(address)
                        }
                    },)*
                })
            }
        }
    };
}
pub(crate) use entry_points;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_that_names_it_with_the_hint() {
        let Err(e) = Library::open("libgate-no-such-library.so.1", "the CUDA driver", "use `--backend cpu`") else {
            panic!("a library that does not exist was loaded");
        };
        assert!(
            e.message
                .starts_with("cannot load the CUDA driver `libgate-no-such-library.so.1`: "),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("libgate-no-such-library.so.1: cannot open"),
            "{}",
            e.message
        );
        assert_eq!(e.hint(), Some("use `--backend cpu`"));
    }

    #[test]
    fn a_missing_symbol_is_an_error_that_names_it() {
        // The C library is always loaded in a Rust test binary on Linux.
        let lib = Library::open("libc.so.6", "the C library", "").unwrap();
        assert!(lib.symbol("malloc").is_ok());
        let e = lib.symbol("gate_no_such_symbol").unwrap_err();
        assert!(
            e.message.contains("`libc.so.6` has no `gate_no_such_symbol`"),
            "{}",
            e.message
        );
        assert!(
            e.hint().is_some_and(|h| h.contains("update the NVIDIA driver")),
            "{e:?}"
        );
    }
}
