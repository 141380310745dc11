//! A deliberately misbehaving OpenID provider for the negative sign-in tests.
//!
//! A real IdP (the `oidc-provider` one the positive tests use) cannot be made to send a bad ID
//! token; this one can. It speaks just enough HTTP/1.1 (one request per connection) to serve
//! discovery, JWKS, an auto-approving `/authorize`, `/token` and `/userinfo`, and signs every ID
//! token by hand so that each [`Scenario`] breaks exactly one thing. The keys below are test keys,
//! published here on purpose: nothing may ever trust them. Signing uses the dev-dependencies
//! `rsa`, `p256` and `hmac` (0.13), already in the lock file with these features via openidconnect.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD as B64};
use hmac::{Hmac, KeyInit as _, Mac as _};
use openidconnect::url::{Url, form_urlencoded};
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature as EcSignature, SigningKey as EcSigningKey};
use rsa::pkcs8::{DecodePrivateKey as _, EncodePublicKey as _, LineEnding};
use rsa::traits::PublicKeyParts as _;
use rsa::{Pkcs1v15Sign, RsaPrivateKey};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

/// What the provider gets wrong: each variant breaks one thing, but `Good`, `Es256Good`, `RotatedKey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Everything right: RS256 with key `rsa-1`.
    Good,
    /// Everything right: ES256 with key `ec-1`.
    Es256Good,
    /// Everything right, but signed by `rsa-2`, which replaced `rsa-1` in the JWKS (key rotation).
    RotatedKey,
    /// `alg: none` and no signature; discovery advertises `none` and `HS256`.
    AlgNone,
    /// HS256 keyed with the client secret; discovery advertises `none` and `HS256`.
    Hs256WithClientSecret,
    /// HS256 keyed with `rsa-1`'s public key PEM (algorithm confusion); advertised as above.
    Hs256WithRsaPublicKey,
    /// RS256 by `rsa-1` with one signature bit flipped.
    BadRsaSignature,
    /// ES256 by `ec-1` with one signature bit flipped.
    BadEs256Signature,
    /// Signed by `rsa-1` under `kid` `rsa-unknown`; the JWKS serves `rsa-1` and `rsa-2`.
    UnknownKidManyKeys,
    /// Signed by `rsa-1` without a `kid`; the JWKS serves `rsa-1` and `rsa-2` (OIDC Core 10.1).
    KidAbsentManyKeys,
    /// `aud` is another client only.
    WrongAud,
    /// `aud` is this client and an untrusted one (with `azp` = this client).
    ExtraUntrustedAud,
    /// `azp` is another client.
    WrongAzp,
    /// `iss` is not the discovered issuer.
    WrongIss,
    /// `exp` is ten minutes ago.
    Expired,
    /// `iat` is an hour from now.
    FutureIat,
    /// No `iat`.
    MissingIat,
    /// `nonce` is not the one sent to `/authorize`.
    WrongNonce,
    /// No `nonce`.
    MissingNonce,
    /// `at_hash` is not the access token's.
    WrongAtHash,
    /// No `sub`.
    MissingSub,
    /// The token response has no `id_token`.
    MissingIdToken,
    /// `/userinfo` answers with another `sub` than the ID token's.
    UserinfoSubMismatch,
    /// The callback's `iss` (RFC 9207) is another issuer.
    ResponseIssMismatch,
    /// The callback has no `iss`, though discovery says it is always sent.
    ResponseIssMissing,
    /// The callback's `state` is not the one sent.
    WrongState,
    /// The callback is `error=access_denied` instead of a code.
    AccessDenied,
    /// Discovery's `issuer` is not the URL it was fetched from.
    DiscoveryIssuerMismatch,
}

impl Scenario {
    /// Every scenario a relying party must refuse (all but `Good`, `Es256Good` and `RotatedKey`).
    pub const MUST_FAIL: [Scenario; 25] = {
        use Scenario::*;
        [
            AlgNone,
            Hs256WithClientSecret,
            Hs256WithRsaPublicKey,
            BadRsaSignature,
            BadEs256Signature,
            UnknownKidManyKeys,
            KidAbsentManyKeys,
            WrongAud,
            ExtraUntrustedAud,
            WrongAzp,
            WrongIss,
            Expired,
            FutureIat,
            MissingIat,
            WrongNonce,
            MissingNonce,
            WrongAtHash,
            MissingSub,
            MissingIdToken,
            UserinfoSubMismatch,
            ResponseIssMismatch,
            ResponseIssMissing,
            WrongState,
            AccessDenied,
            DiscoveryIssuerMismatch,
        ]
    };
}

/// The recorded query of an `/authorize` request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizeRequest {
    /// `client_id`.
    pub client_id: Option<String>,
    /// `redirect_uri`.
    pub redirect_uri: Option<String>,
    /// `response_type`.
    pub response_type: Option<String>,
    /// `scope`.
    pub scope: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// `nonce`.
    pub nonce: Option<String>,
    /// `code_challenge`.
    pub code_challenge: Option<String>,
    /// `code_challenge_method`.
    pub code_challenge_method: Option<String>,
}

/// A running rogue provider; dropping it stops it.
pub struct RogueIdp {
    /// `http://127.0.0.1:PORT`: the issuer to configure, and where discovery is served.
    pub issuer: String,
    /// The port it listens on.
    pub port: u16,
    shared: Arc<Shared>,
    task: AbortHandle,
}

struct Shared {
    issuer: String,
    client_id: String,
    client_secret: String,
    keys: &'static Keys,
    inner: Mutex<Inner>,
}

struct Inner {
    scenario: Scenario,
    claims: Map<String, Value>,
    require_pkce: bool,
    last_authorize: Option<AuthorizeRequest>,
    codes: HashMap<String, AuthorizeRequest>,
    access_tokens: HashMap<String, String>,
    counter: u64,
    /// Codes `/token` refused because the PKCE verifier did not match the code's challenge.
    verifier_refusals: usize,
}

struct Keys {
    rsa1: RsaPrivateKey,
    rsa2: RsaPrivateKey,
    ec: EcSigningKey,
}

struct Request {
    method: String,
    path: String,
    query: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

/// Starts a provider on 127.0.0.1 that knows one client, in scenario [`Scenario::Good`].
pub async fn start(client_id: &str, client_secret: &str) -> Result<RogueIdp, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| format!("local_addr: {e}"))?.port();
    let issuer = format!("http://127.0.0.1:{port}");
    let shared = Arc::new(Shared {
        issuer: issuer.clone(),
        client_id: client_id.to_owned(),
        client_secret: client_secret.to_owned(),
        keys: keys()?,
        inner: Mutex::new(Inner {
            scenario: Scenario::Good,
            claims: Map::new(),
            require_pkce: true,
            last_authorize: None,
            codes: HashMap::new(),
            access_tokens: HashMap::new(),
            counter: 0,
            verifier_refusals: 0,
        }),
    });
    let task = tokio::spawn(serve(listener, Arc::clone(&shared))).abort_handle();
    Ok(RogueIdp { issuer, port, shared, task })
}

impl RogueIdp {
    /// Switches what the provider gets wrong, effective from the next request.
    pub fn set_scenario(&self, scenario: Scenario) {
        self.shared.lock().scenario = scenario;
    }

    /// Sets extra ID token and userinfo claims (email, name, groups, `sub`…); a non-object clears them.
    pub fn set_claims(&self, extra: Value) {
        self.shared.lock().claims = match extra {
            Value::Object(map) => map,
            _ => Map::new(),
        };
    }

    /// Whether `/token` insists on a valid S256 PKCE verifier (the default).
    pub fn set_require_pkce(&self, on: bool) {
        self.shared.lock().require_pkce = on;
    }

    /// How many codes `/token` was asked to redeem with a verifier that does not match.
    pub fn verifier_refusals(&self) -> usize {
        self.shared.lock().verifier_refusals
    }

    /// The query of the last `/authorize` request, if any.
    pub fn last_authorize(&self) -> Option<AuthorizeRequest> {
        self.shared.lock().last_authorize.clone()
    }
}

impl Drop for RogueIdp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Parses the fixed test keys once per process.
fn keys() -> Result<&'static Keys, String> {
    static KEYS: OnceLock<Result<Keys, String>> = OnceLock::new();
    let parse = || {
        Ok(Keys {
            rsa1: RsaPrivateKey::from_pkcs8_pem(RSA_1_PEM).map_err(|e| format!("rsa-1: {e}"))?,
            rsa2: RsaPrivateKey::from_pkcs8_pem(RSA_2_PEM).map_err(|e| format!("rsa-2: {e}"))?,
            ec: EcSigningKey::from_slice(&EC_1_SCALAR).map_err(|e| format!("ec-1: {e}"))?,
        })
    };
    KEYS.get_or_init(parse).as_ref().map_err(Clone::clone)
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Connections live in the JoinSet, so aborting this task aborts them too.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        connections.spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), handle(stream, &shared)).await;
        });
    }
}

async fn handle(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let response = match read_request(&mut stream).await? {
        Some(request) => route(shared, &request),
        None => json_response(400, &json!({ "error": "invalid_request" })),
    };
    let reason = match response.status {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        response.status,
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&response.body).await?;
    stream.shutdown().await
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 64 * 1024 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target)) = (request_line.next(), request_line.next()) else {
        return Ok(None);
    };
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    if length > 1024 * 1024 {
        return Ok(None);
    }
    let mut body = buf.split_off(head_end + 4);
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Some(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body,
    }))
}

fn route(shared: &Shared, request: &Request) -> Response {
    let scenario = shared.lock().scenario;
    let result = match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/.well-known/openid-configuration") => Ok(json_response(200, &discovery(shared, scenario))),
        ("GET", "/jwks") => Ok(json_response(200, &jwks(shared.keys, scenario))),
        ("GET", "/authorize") => Ok(authorize(shared, &request.query)),
        ("POST", "/token") => token(shared, request),
        ("GET" | "POST", "/userinfo") => Ok(userinfo(shared, request)),
        _ => Ok(json_response(404, &json!({ "error": "not_found" }))),
    };
    result.unwrap_or_else(|e| json_response(500, &json!({ "error": "server_error", "error_description": e })))
}

fn discovery(shared: &Shared, scenario: Scenario) -> Value {
    let base = &shared.issuer;
    let issuer = match scenario {
        Scenario::DiscoveryIssuerMismatch => format!("{base}/elsewhere"),
        _ => base.clone(),
    };
    let algs = match scenario {
        Scenario::AlgNone | Scenario::Hs256WithClientSecret | Scenario::Hs256WithRsaPublicKey => {
            json!(["RS256", "ES256", "HS256", "none"])
        }
        _ => json!(["RS256", "ES256"]),
    };
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "jwks_uri": format!("{base}/jwks"),
        "userinfo_endpoint": format!("{base}/userinfo"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": algs,
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "email", "profile", "groups"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "claims_supported": ["sub", "iss", "aud", "exp", "iat", "nonce", "at_hash", "azp", "email", "email_verified", "name", "groups"],
        "authorization_response_iss_parameter_supported": true,
    })
}

fn jwks(keys: &Keys, scenario: Scenario) -> Value {
    let ec = ec_jwk(&keys.ec, "ec-1");
    let served = match scenario {
        Scenario::RotatedKey => vec![rsa_jwk(&keys.rsa2, "rsa-2"), ec],
        Scenario::UnknownKidManyKeys | Scenario::KidAbsentManyKeys => {
            vec![rsa_jwk(&keys.rsa1, "rsa-1"), rsa_jwk(&keys.rsa2, "rsa-2"), ec]
        }
        _ => vec![rsa_jwk(&keys.rsa1, "rsa-1"), ec],
    };
    json!({ "keys": served })
}

fn rsa_jwk(key: &RsaPrivateKey, kid: &str) -> Value {
    json!({
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
        "n": B64.encode(key.n().to_bytes_be()),
        "e": B64.encode(key.e().to_bytes_be()),
    })
}

fn ec_jwk(key: &EcSigningKey, kid: &str) -> Value {
    // Uncompressed SEC1: 0x04 || x || y.
    let point = key.verifying_key().to_sec1_point(false);
    let xy = point.as_bytes().get(1..).unwrap_or_default();
    let (x, y) = xy.split_at(xy.len() / 2);
    json!({
        "kty": "EC", "use": "sig", "alg": "ES256", "kid": kid, "crv": "P-256",
        "x": B64.encode(x),
        "y": B64.encode(y),
    })
}

fn authorize(shared: &Shared, query: &str) -> Response {
    let params: HashMap<String, String> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let param = |name: &str| params.get(name).cloned();
    let request = AuthorizeRequest {
        client_id: param("client_id"),
        redirect_uri: param("redirect_uri"),
        response_type: param("response_type"),
        scope: param("scope"),
        state: param("state"),
        nonce: param("nonce"),
        code_challenge: param("code_challenge"),
        code_challenge_method: param("code_challenge_method"),
    };
    let mut inner = shared.lock();
    inner.last_authorize = Some(request.clone());
    let Some(Ok(mut target)) = request.redirect_uri.as_deref().map(Url::parse) else {
        return json_response(400, &json!({ "error": "invalid_request" }));
    };
    if request.client_id.as_deref() != Some(shared.client_id.as_str()) {
        return json_response(400, &json!({ "error": "unauthorized_client" }));
    }
    let scenario = inner.scenario;
    let mut reply = Vec::new();
    if scenario == Scenario::AccessDenied {
        reply.push(("error", "access_denied".to_owned()));
    } else {
        inner.counter += 1;
        let code = format!("rogue-code-{}", inner.counter);
        inner.codes.insert(code.clone(), request.clone());
        reply.push(("code", code));
    }
    match (scenario, request.state) {
        (Scenario::WrongState, _) => reply.push(("state", "forged-state".to_owned())),
        (_, Some(sent)) => reply.push(("state", sent)),
        (_, None) => {}
    }
    match scenario {
        Scenario::ResponseIssMissing => {}
        Scenario::ResponseIssMismatch => reply.push(("iss", "https://evil.invalid".to_owned())),
        _ => reply.push(("iss", shared.issuer.clone())),
    }
    target.query_pairs_mut().extend_pairs(reply);
    Response { status: 302, headers: vec![("Location", target.into())], body: Vec::new() }
}

fn token(shared: &Shared, request: &Request) -> Result<Response, String> {
    let form: HashMap<String, String> = form_urlencoded::parse(&request.body).into_owned().collect();
    if !client_authenticated(shared, request, &form) {
        return Ok(oauth_error(401, "invalid_client"));
    }
    if form.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return Ok(oauth_error(400, "unsupported_grant_type"));
    }
    let mut inner = shared.lock();
    let Some(auth) = form.get("code").and_then(|code| inner.codes.remove(code)) else {
        return Ok(oauth_error(400, "invalid_grant"));
    };
    let pkce_ok = auth.code_challenge_method.as_deref() == Some("S256")
        && form.get("code_verifier").is_some_and(|verifier| {
            Some(B64.encode(Sha256::digest(verifier.as_bytes()))) == auth.code_challenge
        });
    if form.get("redirect_uri") != auth.redirect_uri.as_ref() {
        return Ok(oauth_error(400, "invalid_grant"));
    }
    if !pkce_ok {
        inner.verifier_refusals += 1;
        if inner.require_pkce {
            return Ok(oauth_error(400, "invalid_grant"));
        }
    }
    inner.counter += 1;
    let access_token = format!("rogue-access-token-{}", inner.counter);
    let claims = id_token_claims(shared, &inner, &auth, &access_token)?;
    let sub = claims.get("sub").and_then(Value::as_str).unwrap_or_default().to_owned();
    inner.access_tokens.insert(access_token.clone(), sub);
    let scenario = inner.scenario;
    drop(inner);
    let mut body = json!({ "access_token": access_token, "token_type": "Bearer", "expires_in": 300 });
    if scenario != Scenario::MissingIdToken {
        body["id_token"] = Value::String(sign(shared, scenario, &claims)?);
    }
    Ok(json_response(200, &body))
}

/// `client_secret_basic` (form-urlencoded id and secret, RFC 6749 2.3.1) or `client_secret_post`.
fn client_authenticated(shared: &Shared, request: &Request, form: &HashMap<String, String>) -> bool {
    let decode = |s: &str| form_urlencoded::parse(s.as_bytes()).next().map(|(k, _)| k.into_owned());
    let basic = request.headers.get("authorization").and_then(|h| h.strip_prefix("Basic "));
    let (id, secret) = match basic {
        Some(encoded) => {
            let pair = STANDARD.decode(encoded.trim()).ok().and_then(|raw| String::from_utf8(raw).ok());
            match pair.as_deref().and_then(|p| p.split_once(':')) {
                Some((id, secret)) => (decode(id), decode(secret)),
                None => return false,
            }
        }
        None => (form.get("client_id").cloned(), form.get("client_secret").cloned()),
    };
    id.as_deref() == Some(shared.client_id.as_str())
        && secret.as_deref() == Some(shared.client_secret.as_str())
}

fn id_token_claims(
    shared: &Shared,
    inner: &Inner,
    auth: &AuthorizeRequest,
    access_token: &str,
) -> Result<Value, String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    let scenario = inner.scenario;
    let mut claims = inner.claims.clone();
    claims.entry("sub").or_insert_with(|| json!("rogue-user-1"));
    let issuer = match scenario {
        Scenario::WrongIss => format!("{}/other", shared.issuer),
        _ => shared.issuer.clone(),
    };
    claims.insert("iss".into(), json!(issuer));
    let aud = match scenario {
        Scenario::WrongAud => json!("another-client"),
        Scenario::ExtraUntrustedAud => json!([shared.client_id, "untrusted-client"]),
        _ => json!(shared.client_id),
    };
    claims.insert("aud".into(), aud);
    match scenario {
        Scenario::ExtraUntrustedAud => claims.insert("azp".into(), json!(shared.client_id)),
        Scenario::WrongAzp => claims.insert("azp".into(), json!("another-client")),
        _ => None,
    };
    let (iat, exp) = match scenario {
        Scenario::Expired => (now - 900, now - 600),
        Scenario::FutureIat => (now + 3600, now + 3900),
        _ => (now, now + 300),
    };
    claims.insert("exp".into(), json!(exp));
    if scenario != Scenario::MissingIat {
        claims.insert("iat".into(), json!(iat));
    }
    match (scenario, &auth.nonce) {
        (Scenario::MissingNonce, _) | (_, None) => None,
        (Scenario::WrongNonce, Some(nonce)) => {
            claims.insert("nonce".into(), json!(format!("{nonce}-forged")))
        }
        (_, Some(nonce)) => claims.insert("nonce".into(), json!(nonce)),
    };
    // OIDC Core 3.1.3.6: the left half of SHA-256 of the access token, base64url.
    let hashed = match scenario {
        Scenario::WrongAtHash => "some-other-access-token",
        _ => access_token,
    };
    claims.insert("at_hash".into(), json!(B64.encode(&Sha256::digest(hashed.as_bytes())[..16])));
    if scenario == Scenario::MissingSub {
        claims.remove("sub");
    }
    Ok(Value::Object(claims))
}

/// The compact JWS `header.claims.signature`, signed (or not) as the scenario says.
fn sign(shared: &Shared, scenario: Scenario, claims: &Value) -> Result<String, String> {
    let keys = shared.keys;
    let (alg, kid) = match scenario {
        Scenario::Es256Good | Scenario::BadEs256Signature => ("ES256", Some("ec-1")),
        Scenario::RotatedKey => ("RS256", Some("rsa-2")),
        Scenario::UnknownKidManyKeys => ("RS256", Some("rsa-unknown")),
        Scenario::KidAbsentManyKeys => ("RS256", None),
        Scenario::AlgNone => ("none", None),
        Scenario::Hs256WithClientSecret | Scenario::Hs256WithRsaPublicKey => ("HS256", None),
        _ => ("RS256", Some("rsa-1")),
    };
    let header = match kid {
        Some(kid) => json!({ "alg": alg, "typ": "JWT", "kid": kid }),
        None => json!({ "alg": alg, "typ": "JWT" }),
    };
    let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
    let mut signature = match scenario {
        Scenario::AlgNone => Vec::new(),
        Scenario::Hs256WithClientSecret => hs256(shared.client_secret.as_bytes(), &input)?,
        Scenario::Hs256WithRsaPublicKey => {
            let pem =
                keys.rsa1.to_public_key().to_public_key_pem(LineEnding::LF).map_err(|e| e.to_string())?;
            hs256(pem.as_bytes(), &input)?
        }
        Scenario::Es256Good | Scenario::BadEs256Signature => {
            let signature: EcSignature = keys.ec.try_sign(input.as_bytes()).map_err(|e| e.to_string())?;
            signature.to_bytes().to_vec()
        }
        Scenario::RotatedKey => rs256(&keys.rsa2, &input)?,
        _ => rs256(&keys.rsa1, &input)?,
    };
    if matches!(scenario, Scenario::BadRsaSignature | Scenario::BadEs256Signature)
        && let Some(byte) = signature.get_mut(20)
    {
        *byte ^= 0x01;
    }
    Ok(format!("{input}.{}", B64.encode(signature)))
}

/// RS256: PKCS#1 v1.5 over SHA-256. rsa 0.9 speaks digest 0.10 and Arbor's sha2 is 0.11, so
/// the hash goes in with its DER DigestInfo prefix (RFC 8017 9.2, note 1) instead of a `Digest`.
fn rs256(key: &RsaPrivateKey, input: &str) -> Result<Vec<u8>, String> {
    const SHA256_DIGEST_INFO: [u8; 19] = [
        0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00,
        0x04, 0x20,
    ];
    let padding = Pkcs1v15Sign { hash_len: Some(32), prefix: SHA256_DIGEST_INFO.into() };
    key.sign(padding, &Sha256::digest(input.as_bytes())).map_err(|e| e.to_string())
}

fn hs256(key: &[u8], input: &str) -> Result<Vec<u8>, String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|e| e.to_string())?;
    mac.update(input.as_bytes());
    Ok(mac.finalize().into_bytes().to_vec())
}

fn userinfo(shared: &Shared, request: &Request) -> Response {
    let inner = shared.lock();
    let bearer = request.headers.get("authorization").and_then(|h| h.strip_prefix("Bearer "));
    let Some(sub) = bearer.and_then(|token| inner.access_tokens.get(token.trim())) else {
        let challenge = ("WWW-Authenticate", r#"Bearer error="invalid_token""#.to_owned());
        return Response { status: 401, headers: vec![challenge], body: Vec::new() };
    };
    let mut claims = inner.claims.clone();
    let sub = match inner.scenario {
        Scenario::UserinfoSubMismatch => "someone-else".to_owned(),
        _ => sub.clone(),
    };
    claims.insert("sub".into(), json!(sub));
    json_response(200, &Value::Object(claims))
}

fn json_response(status: u16, body: &Value) -> Response {
    let content_type = ("Content-Type", "application/json".to_owned());
    Response { status, headers: vec![content_type], body: body.to_string().into_bytes() }
}

fn oauth_error(status: u16, error: &str) -> Response {
    json_response(status, &json!({ "error": error }))
}

// Test keys, deliberately public. rsa-1 and rsa-2: RSA 2048 (PKCS#8); ec-1: a P-256 scalar.

const RSA_1_PEM: &str = "\
-----BEGIN PRIVATE KEY-----
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDb/hrROTlxLjxq
jV4uMJu7rF9SJPPQlmYx3N7ckc6KRy1a1yHacgY6rOookPzAky39MZdnzIUtlWvm
47conHnsbNkmCL+LYHVongKN7MfeDwkpDHoFZS/b64dY2pGa2UeniIyqIe6tSJfw
ODZ+nnlumW/cGvC8iJ0cXDlXUwvktyckbAZwwAlb660P2z7H/jHY5QjnU16pRHMT
nul+tJ2+oWR6P172/k7A8H9ZBzBHcsnui2mGh8emEE878GY5oj+TOGo7UJp6q3ld
S8aUSs9MtQW//kqlvZQHO+m8+ZAlbaJWRip/WtmEJUjS/nNaB0jzXDDGZ40Q3EPL
Oa7k4j/XAgMBAAECggEAWXnzL1jOh72t/gqMnU3Q8Zas2GzGK/cYDrzOejjloDFN
/a4Vi1MoPHI69Q/vdWYHZP1oHuQ84KrvDaRdyStHncUx1vnk6kvrxQbLdC0zp5pG
+AamlI4w1opn7NhNM4WfUsFDsSkG+jzV63L5mytaqYTHzea5Nn18JV5PRji1VCr3
OEBMAwfZOA4TeU8Dx17W6EaAmYPjY2VXggkEWREX2X0oWUe66DbOvsEcloGGb0xV
w5DQ8LLwLNtRZ5TINn3N/iG1kYW436fXC9qIkG2/GNQrFKgs981cYxvkOkYqZJvy
v8ggYe+Rf9od5j0a+T/hz/aLhrr+OP0143dCMTCmXQKBgQDu6JwsYF+8PKBsqS9x
lfmxBqJY0yyzajfhVlu0XvTHO84lK6s8grp8rPkZwNwHORW7DqE1oWZELGoaJUmz
n8Elkezbn0/f8gqJfPlc4N3HCVQlv4r/l+2ZWLmQK+jXN37uDyTVfbavMDJQqARt
3feIGI7NOCEzR6lRwkJlAtrV2wKBgQDruxCnBS8coyPSbTACeYwV102wvvuSYjAh
DTwnjEVEdQO4aNIlXV3rgQks59GGz/CINUFjUc5vaNjaB2cqCy69mvoM9SnuT2aq
39JeOXTnDAXpUIV8ntqfm2Y4pHngDbazIMIu9aCKWsCfaeguDuYYZZdlKqW1oli5
Wu4Z0LbktQKBgQCtlyCa8e+984NRUOEjNCj4Yuylg9NwDdbKiZgaiABtn1vbEE7c
qdRc8MYS21pEeUr73tZuBHctQ+RYWQ2jUYnjBZPHxIsiGlljqwX5YX5jt7iHsRSL
QNYoXRp/0hfeAPneeex2n2CVDH0Ss/J77hOEtOtV29nry78QpAjgImHljwKBgQCm
A/F/XxRF29MfoEweghGZVC9f2bD87++rZ1HFHHGv+6TqG9BcBjxd3lti58RVaF6i
3ra1RujW54VJT8tk/ckmOV3/AC5OqlbI4qaaO2bMTVhgb5gDIzEfFOdR3uwCUkYo
M1rujYhJyA4+duzQeyeraOjNk9Jub+6CY7qqLaaQvQKBgAv0OVcBCto2Aw3mTMJu
fFiaPnUfYIp3e6U2iTBccIzSUct6F11YrOO17sPGa97CSRWKQS1sLRLT8h3Lwmyu
X/v1FmidLxX3Q7aybpxdcn7IFbluQ3VsEJpnmp+tbYAmae2pi994eFBtbizIfJPf
z+eO9L7SEnfl2ki3AVg2Zckr
-----END PRIVATE KEY-----
";

const RSA_2_PEM: &str = "\
-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCwF8ZSBbLOCZnT
+G8lwG1iaMVF2uDcwzH1UbdeVid8QGJQgar8tPWjIYyI0muj92WaRP86X/gddjkA
RBN4osHpcR6AsnE60eJfS4sZXZOIHexAWm+WvymyT17c3KZWHedpJzpUklAVRsiC
QIMm0ofbLhHo6gMs5e9spmeMrBGcGkbWTDXkELLIu3ergETr/4q30zrY0Dj+g7KM
sXTfBVHYIMKXfjxHm5jlBwowSHI+p/wPz71B6c3L9Ijgv7kLDj9mQcGnu405Sr3m
20D0X3Z3Rm5eLdpGlrd2159RHkiZuj/HvgwDQT9S7oDcTyvL0f9pOIJD78DwhVqe
S4VJ91fvAgMBAAECggEAO6RByoQdlIVR8aZiVuH+6mbb8hX5NSxznkhIGA6MHxxb
cDMK676Kt+7j/29tf8KKSh72ZxocGjZxhfKIucI+dUeX8jT9/tMZnfcjLLsx/ddM
rlszEla606boVVvyhpZoS4g6zGwl7Z7kyKD7Csohs42+CSpBWxKh7iXKSq345Oq9
kCaHiaVTxiPJZyVrkmpfE4Hm54PkYH3EMLW0QKOGrpIta1fZdK4PL8Qq8YKTmo+q
pxbprnKAVgmshjIb0I/kWMoWlOT5cGPcxmLG+fnmVF/JWgOPsSheMNXl2TF/g1ku
HjUTJ/0pp78fjqcR7RQcBEL6kuKA1p/ISuE4xXlKGQKBgQDbDAx03YvlOc7ym6/a
NAhzZFZdXwZjGSPLutvOvvlMhhw13u3uHfj82437S+iMZMcTOzBbtGWhboZlUrlt
dHqdzdPNLs/OBZkpkQ410Iyu8SaDpi5fT9rA2YkxsBl3M0ynaxLv1RKIw61JbHkE
XIPhhikcvYS+j49ys8C3DegoiwKBgQDNzKt/7kEz4tIXWSez2hG3IUjStea3M7ed
TWDUqEFbjVtttsjU0R/TaM0jQ2PFi5mwsLarRKXr71XSFidlJjmGNUBfNhd88Kvh
U8PHPGbcWXqO/5W5rCYn8GygIZ7MtTnIfC+k54ni5NJA0Ntw6Q8/r6g/HCPC1HgF
8NJiTMgWrQKBgQCEnhDUmGVgTNWMcNHQ6/vJ0Q+wzB1T1h6j8+esjlblC7T8sJGg
vqjGfi7B3D1Y8pLMg+NNQjTdvcrEgYceS40JCVqYOSU6+Iy4a8gMsMzcBchpoC0n
K3OnmozDdniUgIyCOANpDLmB7+Z0M6Y5C8IUwmMVsXAy5zvUGBwvN8487QKBgDhf
eBrzCKlN2H7MzTNW6MNhOrF9YlWMtR9BsuSNslmBvymuiBTDtBQVARxHuWzDcLYV
sfP4OfsG9Fs39lKexeMdcyShjI2M34g5icdppEN3vzqsiDb0EP+fvCGhE/6/JbTl
T6e8ROkCBRX8ICAttx+a3ltrOeCEktwNu5NxtN2BAoGAPM6Q3NWUgbhEH6a7isZL
yCeQRR2MmJDkxdYD2cKnHx86o3e6YGYXVhazF2GoBT/A7AFZUJHmRppeFjgm+jCU
HH2/kasaTL0dBGw/sWZ8bggz54sFnovi4yFQEQBVq+NW/sfBuQ0yEkSl6HIPr5RU
aquUNXYPNjR9Gr16zSVpbk0=
-----END PRIVATE KEY-----
";

const EC_1_SCALAR: [u8; 32] = [
    0xcd, 0x37, 0xae, 0x5a, 0xf1, 0x4b, 0x52, 0xc4, 0x0a, 0x67, 0x41, 0x95, 0xff, 0x80, 0x71, 0x2c, 0x06,
    0x0d, 0x2a, 0x33, 0xda, 0xe0, 0xe9, 0xf1, 0xe2, 0xfa, 0xed, 0xbe, 0x89, 0x0f, 0x7d, 0x36,
];
