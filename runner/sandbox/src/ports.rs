//! Checking that the fixed ports are free before starting anything.
//!
//! A monitor that cannot bind its port dies in the background with the reason only in
//! its log; checking first turns that into an error that names the port. The check binds
//! 127.0.0.1:PORT and drops the listener at once (Rust sets SO_REUSEADDR, so a port in
//! TIME_WAIT from a previous sandbox does not count as busy, just as it does not for Ceph).

use std::net::{Ipv4Addr, TcpListener};

use crate::error::SandboxError;

/// Fails with [`SandboxError::PortBusy`] for the first port of `ports` that cannot be bound.
pub(crate) fn ensure_free(ports: &[(u16, &'static str)]) -> Result<(), SandboxError> {
    for &(port, purpose) in ports {
        if let Err(e) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            return Err(SandboxError::PortBusy {
                port,
                purpose,
                reason: e.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_port_is_named() {
        let holder = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = holder.local_addr().unwrap().port();
        let err = ensure_free(&[(port, "test")]).unwrap_err();
        assert!(err.to_string().contains(&format!("port {port}")), "{err}");
        drop(holder);
        ensure_free(&[(port, "test")]).unwrap();
    }
}
