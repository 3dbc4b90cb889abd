// A real OAuth 2.1 authorization server for the identity tests:
// oauth2-mock-server (signed JWTs, JWKS, discovery, the token endpoint)
// on 127.0.0.1, driven over stdin.
//
//   node oauth_server.mjs PORT
//
// Prints one JSON line {"issuer": URL} when listening, then answers one
// JSON command per stdin line with one JSON line on stdout:
//   {"cmd": "token", "kid"?, "expires_in"?, "claims"?: {...}}  -> {"token": JWT}
//   {"cmd": "generate", "alg": "RS256", "kid": "k2", "crv"?}   -> {"kid": "k2"}
//   {"cmd": "jwks"}                                             -> {"keys": [...]}
//   {"cmd": "jwks_down", "down": true}                          -> {"ok": true}
// While down, GET /jwks answers 500 (an authorization server that is
// briefly unwell); everything else keeps working.
// Tokens issued by POST /token carry the claims set with
//   {"cmd": "claims", "claims": {...}}                          -> {"ok": true}
// merged into every later token (client-credentials clients such as the
// proxy's upstream authentication use that endpoint), and
//   {"cmd": "ttl", "expires_in": N}                             -> {"ok": true}
// sets the expires_in its answers state from now on (the JWT's exp is not
// changed). What the token endpoint was asked and what it answered:
//   {"cmd": "token_requests"}  -> {"requests": [{"body", "authorization", "access_token"}]}
import { createInterface } from "node:readline";
import { OAuth2Server } from "oauth2-mock-server";

const port = Number(process.argv[2] ?? 0);
const server = new OAuth2Server();
await server.issuer.keys.generate("RS256", { kid: "k1" });

let extraClaims = {};
let endpointTokens = 0;

// The JWKS endpoint serves keys.toJSON(); while `jwksDown`, it throws and
// the server answers 500.
let jwksDown = false;
const publicKeys = server.issuer.keys.toJSON.bind(server.issuer.keys);
server.issuer.keys.toJSON = (...args) => {
  if (jwksDown) throw new Error("JWKS endpoint down (test)");
  return publicKeys(...args);
};
server.service.on("beforeTokenSigning", (token) => {
  Object.assign(token.payload, extraClaims);
  // Two tokens issued within one second differ all the same.
  endpointTokens += 1;
  token.payload.jti ??= `endpoint-token-${endpointTokens}`;
});

let endpointTtl = null;
const tokenRequests = [];
server.service.on("beforeResponse", (response, req) => {
  if (endpointTtl !== null) {
    response.body.expires_in = endpointTtl;
  }
  tokenRequests.push({
    body: req.body,
    authorization: req.headers.authorization ?? null,
    access_token: response.body.access_token ?? null,
  });
});

await server.start(port, "127.0.0.1");
console.log(JSON.stringify({ issuer: server.issuer.url }));

async function handle(command) {
  switch (command.cmd) {
    case "token": {
      const token = await server.issuer.buildToken({
        kid: command.kid,
        expiresIn: command.expires_in,
        scopesOrTransform: (_header, payload) => {
          Object.assign(payload, command.claims ?? {});
        },
      });
      return { token };
    }
    case "generate": {
      // jose refuses an explicit null crv, so only a given one is passed.
      const options = { kid: command.kid };
      if (command.crv) options.crv = command.crv;
      const key = await server.issuer.keys.generate(command.alg, options);
      return { kid: key.kid };
    }
    case "jwks":
      return { keys: publicKeys() };
    case "jwks_down":
      jwksDown = Boolean(command.down);
      return { ok: true };
    case "claims":
      extraClaims = command.claims ?? {};
      return { ok: true };
    case "ttl":
      endpointTtl = command.expires_in;
      return { ok: true };
    case "token_requests":
      return { requests: tokenRequests };
    default:
      return { error: `unknown command ${command.cmd}` };
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = await handle(JSON.parse(line));
  } catch (err) {
    answer = { error: String(err) };
  }
  console.log(JSON.stringify(answer));
}
await server.stop();
