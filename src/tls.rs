//! The TLS settings of every outgoing HTTPS client (providers, MCP servers, the web tool, the
//! OIDC provider): the system's root certificates, read once per process, at the first
//! handshake that needs them.
//!
//! Why one verifier: each reqwest client used to build its own from the system's certificate
//! store, reading and parsing every root certificate again (about 150, from both
//! `/etc/ssl/certs/ca-certificates.crt` and the directory). The server kept two stores from
//! start while it idled, and a client made per request (a member's base URL, each hop of the
//! web tool, each MCP connection) read them all again. Why lazily: an idle server, or one whose
//! providers all speak plain HTTP on a private network, never needs them (BENCHMARKS.md,
//! "Performance work", step 24).

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The platform's certificate verifier, made at the first certificate it is asked to verify.
struct SystemRoots {
    provider: Arc<CryptoProvider>,
    platform: OnceLock<Result<rustls_platform_verifier::Verifier, String>>,
}

impl std::fmt::Debug for SystemRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemRoots").field("loaded", &self.is_loaded()).finish()
    }
}

impl SystemRoots {
    fn new(provider: Arc<CryptoProvider>) -> SystemRoots {
        SystemRoots { provider, platform: OnceLock::new() }
    }

    /// Whether the system's root certificates have been read.
    fn is_loaded(&self) -> bool {
        self.platform.get().is_some()
    }

    fn platform(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.platform
            .get_or_init(|| {
                rustls_platform_verifier::Verifier::new(self.provider.clone()).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| {
                rustls::Error::General(format!("the system's root certificates could not be read: {e}"))
            })
    }
}

impl ServerCertVerifier for SystemRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.platform()?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    // The signatures need no root: checked with the provider's algorithms, as the platform's
    // verifier checks them.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The process's one verifier.
fn system_roots() -> Arc<SystemRoots> {
    static ROOTS: OnceLock<Arc<SystemRoots>> = OnceLock::new();
    ROOTS
        .get_or_init(|| Arc::new(SystemRoots::new(Arc::new(rustls::crypto::ring::default_provider()))))
        .clone()
}

/// A client configuration with the shared verifier, TLS 1.2 and 1.3, and these ALPN protocols
/// (none for a connector that sets its own).
pub fn client_config(alpn: &[&[u8]]) -> Result<rustls::ClientConfig, String> {
    config_with(system_roots(), alpn)
}

fn config_with(roots: Arc<SystemRoots>, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, String> {
    let mut config = rustls::ClientConfig::builder_with_provider(roots.provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// A reqwest client builder on the shared verifier, offering HTTP/2 and HTTP/1.1 as reqwest
/// does by default.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match client_config(&[b"h2", b"http/1.1"]) {
        Ok(config) => builder.tls_backend_preconfigured(config),
        // Not reached with the ring provider (it supports the default versions); reqwest's own
        // settings are the same ones.
        Err(_) => builder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_shares_one_verifier() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        client_builder().build().unwrap();
        assert!(Arc::ptr_eq(&system_roots(), &system_roots()));
        let config = client_config(&[b"h2", b"http/1.1"]).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(client_config(&[]).unwrap().alpn_protocols.is_empty());
    }

    #[test]
    fn the_system_roots_are_read_at_the_first_certificate_not_before() {
        let roots = Arc::new(SystemRoots::new(Arc::new(rustls::crypto::ring::default_provider())));
        let config = config_with(roots.clone(), &[b"h2"]).unwrap();
        reqwest::Client::builder().tls_backend_preconfigured(config).build().unwrap();
        assert!(!roots.is_loaded(), "a client was built and no handshake made");
        assert!(!roots.supported_verify_schemes().is_empty());
        let junk = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
        let name = ServerName::try_from("example.com").unwrap();
        let verdict = roots.verify_server_cert(&junk, &[], &name, &[], UnixTime::now());
        assert!(verdict.is_err(), "a malformed certificate is refused");
        assert!(roots.is_loaded());
    }
}
