// A real SMTP server on loopback for Arbor's mail tests, plus a tiny HTTP API to read mail back.
//
//   SMTP_PORT=2525 SMTP_HTTP_PORT=2580 node tests/services/smtp.mjs
//
// Environment (all optional):
//   SMTP_PORT         SMTP port on 127.0.0.1 (0 or unset: any free port, printed in the READY line)
//   SMTP_HTTP_PORT    HTTP API port on 127.0.0.1 (0 or unset: any free port)
//   SMTP_USER/PASS    when both are set, AUTH PLAIN/LOGIN is required; wrong credentials get 535
//   SMTP_REJECT_RCPT  comma-separated addresses refused at RCPT TO with 550
//   SMTP_WATCH_STDIN  "1": exit when stdin closes (so a killed test process leaves no orphan)
//
// Plain SMTP only: no TLS, STARTTLS is not offered. Once both servers listen it prints exactly one
// line, `SMTP READY smtp=PORT http=PORT`, to stdout. HTTP API:
//   GET    /messages  JSON array of {from, to[], subject, text, html, headers{}, raw_size, auth_user}
//   DELETE /messages  forget them all
// `from`/`to` are the SMTP envelope (MAIL FROM / RCPT TO); header values are in `headers`.

import http from 'node:http';
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

const env = process.env;
const user = env.SMTP_USER || '';
const pass = env.SMTP_PASS || '';
const auth = user !== '' && pass !== '';
const reject = new Set(
  (env.SMTP_REJECT_RCPT || '').split(',').map((a) => a.trim().toLowerCase()).filter(Boolean),
);
const messages = [];

// Raw header lines → {lower-case name: unfolded raw value}; repeated headers are joined by "\n".
function headerObject(lines) {
  const out = {};
  for (const { key, line } of lines) {
    const value = line.slice(line.indexOf(':') + 1).replace(/\r?\n[ \t]+/g, ' ').trim();
    out[key] = key in out ? `${out[key]}\n${value}` : value;
  }
  return out;
}

const smtp = new SMTPServer({
  logger: false,
  disabledCommands: auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
  authMethods: ['PLAIN', 'LOGIN'],
  allowInsecureAuth: true, // AUTH over plain TCP: this is loopback-only test traffic
  authOptional: !auth,
  onAuth(a, _session, cb) {
    if (a.username === user && a.password === pass) return cb(null, { user: a.username });
    const err = new Error('Authentication credentials invalid');
    err.responseCode = 535;
    cb(err);
  },
  onRcptTo(address, _session, cb) {
    if (!reject.has(address.address.toLowerCase())) return cb();
    const err = new Error(`Recipient <${address.address}> rejected`);
    err.responseCode = 550;
    cb(err);
  },
  onData(stream, session, cb) {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('error', cb);
    stream.on('end', async () => {
      try {
        const raw = Buffer.concat(chunks);
        // Report only the parts the mail really has: no text made up from HTML or vice versa.
        const mail = await simpleParser(raw, {
          skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true,
        });
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          subject: mail.subject ?? '',
          text: mail.text || null,
          html: mail.html || null,
          headers: headerObject(mail.headerLines),
          raw_size: raw.length,
          auth_user: session.user ?? null,
        });
        cb(null, 'Message accepted');
      } catch (err) {
        cb(err);
      }
    });
  },
});
smtp.on('error', (err) => console.error('smtp:', err.message));

const api = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  const send = (code, body) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (path !== '/messages') return send(404, { error: 'not found' });
  if (req.method === 'GET') return send(200, messages);
  if (req.method === 'DELETE') {
    messages.length = 0;
    return send(200, { cleared: true });
  }
  send(405, { error: 'method not allowed' });
});

const listen = (server, port) =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server.address().port));
  });

function shutdown() {
  api.close();
  smtp.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref(); // don't wait long for open SMTP sessions
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
if (env.SMTP_WATCH_STDIN === '1') {
  process.stdin.on('end', shutdown).on('close', shutdown).resume();
}

try {
  const smtpPort = await listen(smtp.server, Number(env.SMTP_PORT || 0));
  const httpPort = await listen(api, Number(env.SMTP_HTTP_PORT || 0));
  console.log(`SMTP READY smtp=${smtpPort} http=${httpPort}`);
} catch (err) {
  console.error(`smtp.mjs: cannot listen: ${err.message}`);
  process.exit(1);
}
