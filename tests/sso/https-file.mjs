// A web server over https for the domain-proof tests (tests/api/sso.rs): it answers
// GET /.well-known/switchboard-verification.txt as told for each Host, with a certificate of
// the test's own CA, on 127.0.0.1 only. Never use it for anything else.
//
// Environment:
//   HTTPS_PORT      port on 127.0.0.1
//   HTTPS_CERT      PEM certificate chain; HTTPS_KEY its PEM key
//   HTTPS_FILES     JSON {"<host>": {"status": 200, "body": "...", "location": "..."}}
//   HTTPS_LIFETIME  seconds before it exits whatever happens (default 600)
//
// Prints exactly one line `https-file ready <port>` on stdout when it serves, then one line
// `hit <host> <path>` per request.
import fs from 'node:fs';
import https from 'node:https';

function fail(msg) {
  console.error(`https-file: ${msg}`);
  process.exit(2);
}

const env = process.env;
for (const name of ['HTTPS_PORT', 'HTTPS_CERT', 'HTTPS_KEY', 'HTTPS_FILES']) {
  if (!env[name]) fail(`${name} must be set`);
}
let files;
try {
  files = JSON.parse(env.HTTPS_FILES);
} catch (err) {
  fail(`HTTPS_FILES must be JSON: ${err.message}`);
}
const lifetime = Number(env.HTTPS_LIFETIME || 600);
setTimeout(() => process.exit(0), lifetime * 1000).unref();

const server = https.createServer({ cert: fs.readFileSync(env.HTTPS_CERT), key: fs.readFileSync(env.HTTPS_KEY) }, (req, res) => {
  const host = String(req.headers.host || '').replace(/:\d+$/, '').toLowerCase();
  console.log(`hit ${host} ${req.url}`);
  const file = files[host];
  if (!file || req.url !== '/.well-known/switchboard-verification.txt') {
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    return;
  }
  const headers = { 'Content-Type': 'text/plain' };
  if (file.location) headers.Location = file.location;
  res.writeHead(file.status || 200, headers).end(file.body || '');
});
server.on('error', (err) => fail(err.message));
server.listen(Number(env.HTTPS_PORT), '127.0.0.1', () => {
  console.log(`https-file ready ${server.address().port}`);
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
