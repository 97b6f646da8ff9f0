//! What the model clients trust: the platform verifier (on Linux, the
//! system's roots, e.g. `/etc/ssl/certs` from ca-certificates), the bundled
//! webpki roots (so an image without ca-certificates still reaches the public
//! providers), and a provider's own CA file for a gateway or vLLM behind a
//! private CA. rustls runs on ring, named here for every reqwest client of
//! the process, so aws-lc is never compiled.

/// Installs ring as rustls's process-wide crypto provider, once; a provider
/// installed earlier (by a host embedding the crate) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Reads a PEM file of one or more CA certificates; the error names the
/// file and says what is wrong with it.
pub fn read_ca_file(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem =
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|error| format!("{} is not a PEM certificate file: {error}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(certificates)
}

/// A client builder trusting the system's roots, the bundled roots and `extra_cas`.
pub fn client_builder(extra_cas: &[reqwest::Certificate]) -> reqwest::ClientBuilder {
    install_crypto_provider();
    let bundled = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok());
    reqwest::Client::builder().tls_certs_merge(bundled.chain(extra_cas.iter().cloned()))
}
