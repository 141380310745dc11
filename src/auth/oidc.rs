//! OpenID Connect relying party (Authorization Code + PKCE S256) on `openidconnect`.
//!
//! What this module guarantees (SECURITY.md §2): discovery must name exactly the configured
//! issuer; every authorization request has a random `state`, `nonce` and an S256 PKCE
//! challenge; the ID token's signature is checked against the issuer's JWKS with an
//! allow-list of asymmetric algorithms (never `none`, never HMAC with the client secret); `iss`,
//! `aud` (no untrusted extra audiences), `azp`, `exp`, `iat`, `nonce` and `at_hash` are
//! verified; an `iss` in the authorization response must be the configured issuer; UserInfo
//! must describe the same `sub`.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthenticationFlow, CoreClaimName, CoreClaimType, CoreClient, CoreClientAuthMethod,
    CoreGenderClaim, CoreGrantType, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm, CoreJwsSigningAlgorithm, CoreResponseMode, CoreResponseType,
    CoreSubjectIdentifierType,
};
use openidconnect::{
    AccessTokenHash, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    Scope, SubjectIdentifier, TokenResponse, UserInfoClaims,
};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;

use crate::config::OidcConfig;

/// How long discovery metadata (and with it the JWKS) is reused before it is fetched again.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);

/// A failed OIDC step; the text is safe to show (no tokens, no secrets).
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// OIDC is not configured.
    #[error("sign-in with an identity provider is not configured")]
    Off,
    /// Discovery or the provider's metadata failed.
    #[error("the identity provider could not be reached or described itself wrongly: {0}")]
    Discovery(String),
    /// The callback or the tokens did not pass a check.
    #[error("the identity provider's answer was refused: {0}")]
    Rejected(String),
}

/// The HTTP client the `openidconnect` crate calls, over Arbor's reqwest (redirects off).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(String);

type HttpFuture = Pin<Box<dyn Future<Output = Result<openidconnect::HttpResponse, HttpError>> + Send>>;

fn http_adapter(client: reqwest::Client) -> impl Fn(openidconnect::HttpRequest) -> HttpFuture {
    move |request: openidconnect::HttpRequest| {
        let client = client.clone();
        Box::pin(async move {
            let request = reqwest::Request::try_from(request).map_err(|e| HttpError(e.to_string()))?;
            let response =
                client.execute(request).await.map_err(|e| HttpError(e.without_url().to_string()))?;
            let mut builder = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            // Discovery documents, key sets and token answers are small: an identity provider
            // cannot make Arbor hold more than this.
            const MAX_IDP_BYTES: usize = 1024 * 1024;
            let mut response = response;
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| HttpError(e.to_string()))? {
                if body.len() + chunk.len() > MAX_IDP_BYTES {
                    return Err(HttpError("the identity provider's answer is larger than 1 MiB".into()));
                }
                body.extend_from_slice(&chunk);
            }
            builder.body(body).map_err(|e| HttpError(e.to_string()))
        })
    }
}

type DiscoveredClient = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The parts of the discovery document `openidconnect`'s core metadata does not carry, read
/// from the same (issuer-checked) document.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
pub struct ExtraMetadata {
    /// RP-initiated logout endpoint.
    end_session_endpoint: Option<String>,
    /// RFC 9207: the provider puts `iss` into authorization responses.
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
}

impl openidconnect::AdditionalProviderMetadata for ExtraMetadata {}

type Metadata = openidconnect::ProviderMetadata<
    ExtraMetadata,
    CoreAuthDisplay,
    CoreClientAuthMethod,
    CoreClaimName,
    CoreClaimType,
    CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    CoreResponseMode,
    CoreResponseType,
    CoreSubjectIdentifierType,
>;

/// Clock skew tolerated for `iat`.
const IAT_LEEWAY_SECS: i64 = 60;

struct Discovered {
    client: DiscoveredClient,
    extra: ExtraMetadata,
    fetched: Instant,
}

/// A started authorization: where to send the browser, and what to remember for the callback.
pub struct AuthRequest {
    /// The provider's authorization URL with all parameters.
    pub url: String,
    /// `state` sent (compared on return).
    pub state: String,
    /// `nonce` sent (checked in the ID token).
    pub nonce: String,
    /// PKCE verifier for the code exchange.
    pub pkce_verifier: String,
}

/// What the provider vouched for, after every check passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifiedIdentity {
    /// The issuer (exactly the configured one).
    pub issuer: String,
    /// The stable subject at that issuer.
    pub subject: String,
    /// Email, if the provider sent one.
    pub email: Option<String>,
    /// Whether the provider says it verified the email (missing means no).
    pub email_verified: bool,
    /// Full name, if sent.
    pub name: Option<String>,
    /// Preferred user name, if sent (display data only).
    pub preferred_username: Option<String>,
    /// Group names from the configured claim, ID token and UserInfo merged.
    pub groups: Vec<String>,
    /// Whether either sent the claim as a list (or a string of names): without it, a sign-in
    /// leaves the person's synced group memberships as they were.
    pub groups_sent: bool,
}

/// The relying party: configuration, an HTTP client, and cached discovery.
pub struct Oidc {
    cfg: OidcConfig,
    redirect_url: String,
    http: reqwest::Client,
    discovered: RwLock<Option<Discovered>>,
}

impl Oidc {
    /// A relying party for the configured issuer, or `None` when OIDC is off.
    pub fn new(cfg: &OidcConfig, public_url: &str) -> Result<Option<Oidc>, OidcError> {
        if cfg.issuer.is_empty() {
            return Ok(None);
        }
        let http = crate::tls::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| OidcError::Discovery(e.to_string()))?;
        Ok(Some(Oidc {
            cfg: cfg.clone(),
            redirect_url: format!("{public_url}/auth/oidc/callback"),
            http,
            discovered: RwLock::new(None),
        }))
    }

    /// The name on the sign-in button.
    pub fn display_name(&self) -> &str {
        &self.cfg.display_name
    }

    /// The redirect URI to register at the provider.
    pub fn redirect_url(&self) -> &str {
        &self.redirect_url
    }

    async fn client(&self) -> Result<(DiscoveredClient, ExtraMetadata), OidcError> {
        self.client_refreshed(false).await
    }

    /// The client from cached discovery, or from a new fetch when stale or when `force` is set
    /// (the provider rotated its keys).
    async fn client_refreshed(&self, force: bool) -> Result<(DiscoveredClient, ExtraMetadata), OidcError> {
        if !force {
            let cached = self.discovered.read().await;
            if let Some(d) = cached.as_ref().filter(|d| d.fetched.elapsed() < DISCOVERY_TTL) {
                return Ok((d.client.clone(), d.extra.clone()));
            }
        }
        let issuer =
            IssuerUrl::new(self.cfg.issuer.clone()).map_err(|e| OidcError::Discovery(e.to_string()))?;
        let http = http_adapter(self.http.clone());
        // Fails unless the document's `issuer` is exactly the configured one.
        let metadata =
            Metadata::discover_async(issuer, &http).await.map_err(|e| OidcError::Discovery(e.to_string()))?;
        let extra = metadata.additional_metadata().clone();
        let redirect =
            RedirectUrl::new(self.redirect_url.clone()).map_err(|e| OidcError::Discovery(e.to_string()))?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.cfg.client_id.clone()),
            (!self.cfg.client_secret.is_empty()).then(|| ClientSecret::new(self.cfg.client_secret.clone())),
        )
        .set_redirect_uri(redirect);
        *self.discovered.write().await =
            Some(Discovered { client: client.clone(), extra: extra.clone(), fetched: Instant::now() });
        Ok((client, extra))
    }

    /// Starts a sign-in: a fresh state, nonce and PKCE pair, and the URL to send the browser to.
    pub async fn begin(&self) -> Result<AuthRequest, OidcError> {
        let (client, _) = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.cfg.scopes {
            if scope != "openid" {
                request = request.add_scope(Scope::new(scope.clone()));
            }
        }
        let (url, state, nonce) = request.url();
        Ok(AuthRequest {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Finishes a sign-in from the callback's `code` and `iss`, with what `begin` returned.
    /// The caller has already matched `state`.
    pub async fn finish(
        &self,
        code: &str,
        response_iss: Option<&str>,
        nonce: &str,
        pkce_verifier: &str,
    ) -> Result<VerifiedIdentity, OidcError> {
        let rejected = |m: String| OidcError::Rejected(m);
        let (client, extra) = self.client().await?;
        let iss_supported = extra.authorization_response_iss_parameter_supported;
        // RFC 9207: an `iss` in the response must be ours; required when the provider says it sends one.
        match response_iss {
            Some(iss) if iss != self.cfg.issuer => {
                return Err(rejected("the response came from another issuer".into()));
            }
            None if iss_supported => return Err(rejected("the response carries no issuer".into())),
            _ => {}
        }
        let http = http_adapter(self.http.clone());
        let tokens = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| rejected(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_string()))
            .request_async(&http)
            .await
            .map_err(|e| rejected(format!("code exchange failed: {e}")))?;
        let id_token = tokens.id_token().ok_or_else(|| rejected("no ID token was returned".into()))?;
        let allowed: Vec<CoreJwsSigningAlgorithm> = self
            .cfg
            .signing_algs
            .iter()
            .filter_map(|a| match a.as_str() {
                "RS256" => Some(CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256),
                "RS384" => Some(CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384),
                "RS512" => Some(CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512),
                "PS256" => Some(CoreJwsSigningAlgorithm::RsaSsaPssSha256),
                "ES256" => Some(CoreJwsSigningAlgorithm::EcdsaP256Sha256),
                "ES384" => Some(CoreJwsSigningAlgorithm::EcdsaP384Sha384),
                "EdDSA" => Some(CoreJwsSigningAlgorithm::EdDsa),
                _ => None,
            })
            .collect();
        let nonce = Nonce::new(nonce.to_string());
        let rotated = matches!(
            id_token.claims(&verifier_for(&client, &allowed), &nonce),
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(
                openidconnect::SignatureVerificationError::NoMatchingKey,
            ))
        );
        // The provider may have rotated its keys since discovery: fetch them once more.
        let client = if rotated { self.client_refreshed(true).await?.0 } else { client };
        let verifier = verifier_for(&client, &allowed);
        let claims = id_token.claims(&verifier, &nonce).map_err(|e| rejected(format!("ID token: {e}")))?;
        if let Some(azp) = claims.authorized_party()
            && azp.as_str() != self.cfg.client_id
        {
            return Err(rejected("ID token: it was issued to another client (azp)".into()));
        }
        if let Some(expected) = claims.access_token_hash() {
            let alg = id_token.signing_alg().map_err(|e| rejected(e.to_string()))?;
            let key = id_token.signing_key(&verifier).map_err(|e| rejected(e.to_string()))?;
            let actual = AccessTokenHash::from_token(tokens.access_token(), alg, key)
                .map_err(|e| rejected(e.to_string()))?;
            if actual != *expected {
                return Err(rejected("ID token: at_hash does not match the access token".into()));
            }
        }
        let subject = claims.subject().as_str().to_string();
        let mut identity = VerifiedIdentity {
            issuer: self.cfg.issuer.clone(),
            subject: subject.clone(),
            email: claims.email().map(|e| e.as_str().to_string()),
            email_verified: claims.email_verified().unwrap_or(false),
            name: claims.name().and_then(|n| n.get(None)).map(|n| n.as_str().to_string()),
            preferred_username: claims.preferred_username().map(|u| u.as_str().to_string()),
            groups: Vec::new(),
            groups_sent: false,
        };
        if let Some(groups) = groups_from_jwt(&id_token.to_string(), &self.cfg.groups_claim) {
            identity.groups = groups;
            identity.groups_sent = true;
        }
        // UserInfo, when offered, must describe the same subject; its groups are merged in.
        if let Ok(request) =
            client.user_info(tokens.access_token().clone(), Some(SubjectIdentifier::new(subject)))
        {
            let info: UserInfoClaims<ExtraClaims, CoreGenderClaim> =
                request.request_async(&http).await.map_err(|e| rejected(format!("UserInfo: {e}")))?;
            if identity.email.is_none() {
                identity.email = info.email().map(|e| e.as_str().to_string());
                identity.email_verified = info.email_verified().unwrap_or(false);
            }
            if identity.name.is_none() {
                identity.name = info.name().and_then(|n| n.get(None)).map(|n| n.as_str().to_string());
            }
            let rest = &info.additional_claims().rest;
            let claim =
                rest.get(&self.cfg.groups_claim).or_else(|| nested_claim(rest, &self.cfg.groups_claim));
            if let Some(groups) = groups_from_value(claim) {
                identity.groups_sent = true;
                for g in groups {
                    if !identity.groups.contains(&g) {
                        identity.groups.push(g);
                    }
                }
            }
        }
        Ok(identity)
    }

    /// Where to send the browser to sign out at the provider too, if it supports that.
    pub async fn end_session_url(&self, post_logout_redirect: &str) -> Option<String> {
        let (_, extra) = self.client().await.ok()?;
        let mut url = reqwest::Url::parse(&extra.end_session_endpoint?).ok()?;
        url.query_pairs_mut()
            .append_pair("client_id", &self.cfg.client_id)
            .append_pair("post_logout_redirect_uri", post_logout_redirect);
        Some(url.to_string())
    }
}

/// The ID token verifier: the allowed algorithms only, and no `iat` in the future.
fn verifier_for<'a>(
    client: &'a DiscoveredClient,
    allowed: &[CoreJwsSigningAlgorithm],
) -> openidconnect::core::CoreIdTokenVerifier<'a> {
    client.id_token_verifier().set_allowed_algs(allowed.to_vec()).set_issue_time_verifier_fn(|iat| {
        if iat <= chrono::Utc::now() + chrono::TimeDelta::seconds(IAT_LEEWAY_SECS) {
            Ok(())
        } else {
            Err(format!("issued in the future ({iat})"))
        }
    })
}

/// Claims beyond the standard ones, kept as raw JSON (for the groups claim).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExtraClaims {
    /// Every claim not otherwise parsed.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl openidconnect::AdditionalClaims for ExtraClaims {}

/// The names in a groups claim: a list of strings, or one string of names separated by commas
/// or spaces; `None` when the claim is missing or of another shape.
fn groups_from_value(v: Option<&serde_json::Value>) -> Option<Vec<String>> {
    match v {
        Some(serde_json::Value::Array(items)) => {
            Some(items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect())
        }
        Some(serde_json::Value::String(s)) => {
            Some(s.split([',', ' ']).filter(|g| !g.is_empty()).map(str::to_string).collect())
        }
        _ => None,
    }
}

/// A claim named by a dotted path (`realm_access.roles`), for providers that nest groups; only
/// tried when no claim has the whole name (claim names may themselves hold dots).
fn nested_claim<'a>(
    claims: &'a serde_json::Map<String, serde_json::Value>,
    path: &str,
) -> Option<&'a serde_json::Value> {
    let mut parts = path.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// Reads the groups claim from an ID token whose signature was already verified.
fn groups_from_jwt(jwt: &str, claim: &str) -> Option<Vec<String>> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let serde_json::Value::Object(json) = serde_json::from_slice::<serde_json::Value>(&bytes).ok()? else {
        return None;
    };
    groups_from_value(json.get(claim).or_else(|| nested_claim(&json, claim)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_from_arrays_strings_or_nested_claims() {
        let payload = URL_SAFE_NO_PAD.encode(
            br#"{"groups":["arbor-admins","staff"],"roles":"a b","realm_access":{"roles":["x"]},"n":3}"#,
        );
        let jwt = format!("e30.{payload}.sig");
        assert_eq!(groups_from_jwt(&jwt, "groups"), Some(vec!["arbor-admins".into(), "staff".into()]));
        assert_eq!(groups_from_jwt(&jwt, "roles"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(groups_from_jwt(&jwt, "realm_access.roles"), Some(vec!["x".into()]));
        assert_eq!(groups_from_jwt(&jwt, "missing"), None);
        assert_eq!(groups_from_jwt(&jwt, "n"), None);
        assert_eq!(groups_from_jwt(&jwt, "realm_access.roles.deeper"), None);
        assert_eq!(groups_from_jwt("garbage", "groups"), None);
    }
}
