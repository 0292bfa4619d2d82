// The GraphQL-over-HTTP audit (npm `graphql-http`'s auditServer) against a running server.
// Every request carries the bearer token: taskroute authenticates before parsing.
//
//   npm install --prefix /tmp/ghttp graphql-http graphql
//   NODE_PATH=/tmp/ghttp/node_modules node scripts/graphql_http_audit.mjs \
//       http://127.0.0.1:8000/graphql "$TASKROUTE_ADMIN_TOKEN"
//
// Last run (2026-12-01, this tree): 61 checks, 0 warnings, 0 errors.
import { createRequire } from 'node:module';
const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + '/' : import.meta.url);
const { auditServer } = require('graphql-http');
const url = process.argv[2], token = process.argv[3];
const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set('authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const results = await auditServer({ url, fetchFn });
const bad = results.filter((r) => r.status !== 'ok');
for (const r of bad) console.log(r.status.toUpperCase(), r.id, r.name, r.reason || '');
console.log(`${results.length} checks, ${results.filter(r=>r.status==='warn').length} warnings, ${results.filter(r=>r.status==='error').length} errors`);
