// A real OpenID Provider (the `oidc-provider` package) on loopback, for Arbor's sign-in tests.
// Started and stopped by tests/it/support/idp.rs; see there for the Rust side.
//
// Environment:
//   IDP_PORT                       port on 127.0.0.1; the issuer is http://127.0.0.1:$IDP_PORT
//   IDP_CLIENT_ID, IDP_CLIENT_SECRET   the one registered client (Arbor)
//   IDP_REDIRECT_URIS              comma-separated redirect URIs of that client
//   IDP_POST_LOGOUT_REDIRECT_URIS  comma-separated post-logout redirect URIs (may be empty)
//   IDP_ACCOUNTS                   path of a JSON array of
//                                  {sub, email, email_verified, name, preferred_username, groups}
//   IDP_ALG                        ID token signing alg of the client: RS256 (default) or ES256
//
// Behaviour: authorization code flow only, PKCE (S256) required, client_secret_basic or
// client_secret_post at /token, scopes openid email profile groups with every claim in the ID
// token too, RFC 9207 `iss` in the authorization response, userinfo, RP-initiated logout without
// a confirmation click. Sign-in uses the built-in development login form, whose "login" field is
// the account's `sub` (any password); an unknown login ends the flow with `access_denied`.
// There is never a consent page. Prints `IDP READY <issuer>` once listening.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

function env(name, fallback) {
  const value = process.env[name] ?? fallback;
  if (value === undefined) {
    console.error(`idp.mjs: ${name} is required`);
    process.exit(2);
  }
  return value;
}
const list = (value) => value.split(',').map((s) => s.trim()).filter(Boolean);

const port = Number(env('IDP_PORT'));
const issuer = `http://127.0.0.1:${port}`;
const alg = env('IDP_ALG', 'RS256');
if (!['RS256', 'ES256'].includes(alg)) {
  console.error(`idp.mjs: IDP_ALG must be RS256 or ES256, not ${alg}`);
  process.exit(2);
}
const accounts = new Map(
  JSON.parse(readFileSync(env('IDP_ACCOUNTS'), 'utf8')).map((a) => [a.sub, a]),
);

// Fresh signing keys at every start: one RSA (RS256) and one EC P-256 (ES256), distinct kids.
const jwk = (type, options, kid, keyAlg) => ({
  ...generateKeyPairSync(type, options).privateKey.export({ format: 'jwk' }),
  kid,
  alg: keyAlg,
  use: 'sig',
});
const keys = [
  jwk('rsa', { modulusLength: 2048 }, 'idp-rsa-1', 'RS256'),
  jwk('ec', { namedCurve: 'P-256' }, 'idp-ec-1', 'ES256'),
];

// Which claims each scope releases.
const claims = {
  openid: ['sub'],
  email: ['email', 'email_verified'],
  profile: ['name', 'preferred_username'],
  groups: ['groups'],
};

const provider = new Provider(issuer, {
  clients: [{
    client_id: env('IDP_CLIENT_ID'),
    client_secret: env('IDP_CLIENT_SECRET'),
    redirect_uris: list(env('IDP_REDIRECT_URIS')),
    post_logout_redirect_uris: list(env('IDP_POST_LOGOUT_REDIRECT_URIS', '')),
    response_types: ['code'],
    grant_types: ['authorization_code'],
    // The provider accepts client_secret_post too for a client registered with either.
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: alg,
  }],
  jwks: { keys },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  responseTypes: ['code'],
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 supports
  clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
  enabledJWA: { idTokenSigningAlgValues: ['RS256', 'ES256'] },
  scopes: Object.keys(claims),
  claims,
  conformIdTokenClaims: false, // the scope's claims go in the ID token, not only in userinfo
  features: {
    devInteractions: { enabled: true },
    userinfo: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      // Instead of asking "Do you want to sign out?", submit the confirmation form at once
      // (with logout=yes, as the "Yes" button would). A client that runs no JavaScript posts
      // the form's fields itself.
      async logoutSource(ctx, form) {
        const auto = form.replace('</form>', '<input type="hidden" name="logout" value="yes"/></form>');
        ctx.body = `<!DOCTYPE html><html><head><title>Signing out</title></head><body>${auto}`
          + '<script>document.forms[0].submit()</script></body></html>';
      },
    },
  },
  findAccount(ctx, id) {
    const account = accounts.get(id);
    if (!account) return undefined; // unknown: no session account
    return {
      accountId: id,
      claims: async () => ({ ...account, sub: id }),
    };
  },
  // No consent page: every authorization is granted every scope and claim it asks for.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope([...ctx.oidc.requestParamScopes].join(' '));
    grant.addOIDCClaims(Object.values(claims).flat());
    await grant.save();
    return grant;
  },
});

// The dev login form's submissions are answered here: a known login signs that account in, an
// unknown one ends the flow with access_denied back at the client (instead of a session the
// provider would not accept). Other posts get the body read here back as req.body.
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && /^\/interaction\/[^/]+$/.test(ctx.path)) {
    const chunks = [];
    for await (const chunk of ctx.req.iterator({ destroyOnReturn: false })) chunks.push(chunk);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    if (form.get('prompt') === 'login') {
      const login = form.get('login') ?? '';
      const result = accounts.has(login)
        ? { login: { accountId: login } }
        : { error: 'access_denied', error_description: 'unknown account' };
      await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
      ctx.respond = false; // interactionFinished has answered (303) on the raw response
      return;
    }
    ctx.req.body = form.toString();
  }
  await next();
});

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`IDP READY ${issuer}`);
});

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
