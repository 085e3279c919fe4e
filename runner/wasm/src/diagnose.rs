//! Failures whose wasmtime wording means nothing to someone running a
//! pipeline, said in their terms.

/// What the hostcall-fuel error of wasmtime says (its type is private).
const HOSTCALL_FUEL: &str = "fuel allocated for hostcalls has been exhausted";
/// wasmtime's default hostcall fuel: bytes copied out of a guest per call.
pub const HOSTCALL_BYTES: usize = 128 << 20;

/// A user-facing account of a trap or call error, when wasmtime's own is
/// misleading; `None` to keep wasmtime's.
pub fn explain(err: &wasmtime::Error) -> Option<String> {
    if err.chain().any(|e| e.to_string().contains(HOSTCALL_FUEL)) {
        return Some(format!(
            "handed the host more than {} MiB in one call (a huge return value or host-call argument) and was stopped; return less, or write large data in parts",
            HOSTCALL_BYTES >> 20
        ));
    }
    match err.downcast_ref::<wasmtime::Trap>()? {
        wasmtime::Trap::StackOverflow => Some(
            "exhausted its call stack (recursion too deep?) and was stopped".to_string(),
        ),
        // Rust, C and most compiled guests keep their stack in linear memory
        // at its bottom: a stack overflow runs off the start of the memory.
        wasmtime::Trap::MemoryOutOfBounds => Some(
            "crashed accessing memory outside its own (wasm trap: out of bounds memory access); for a Rust or C plugin this is most often a stack overflow from too deep recursion, otherwise a bug in the plugin"
                .to_string(),
        ),
        _ => None,
    }
}

/// Why `bytes` cannot be a plugin before anything parses them: only files
/// named `.wat` are read as WebAssembly text, so that a text file, a script
/// or an HTML error page saved as `.wasm` is not reported as a WAT syntax
/// error.
pub fn not_wasm(path: &std::path::Path, bytes: &[u8]) -> Option<String> {
    let is_wat = path.extension().is_some_and(|e| e == "wat");
    if is_wat || bytes.starts_with(b"\0asm") {
        return None;
    }
    let shown: String = String::from_utf8_lossy(&bytes[..bytes.len().min(16)])
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    Some(if bytes.is_empty() {
        "the file is empty".to_string()
    } else {
        format!(
            "the file is not WebAssembly: it does not start with the `\\0asm` magic bytes (it starts with `{shown}`); only files named `.wat` are read as WebAssembly text"
        )
    })
}
