// A browser cannot set an Authorization header on a WebSocket: it offers its token as a subprotocol.
function acpSocket(url, token) {
  const bytes = String.fromCharCode(...new TextEncoder().encode(token));  // the token's UTF-8
  const encoded = btoa(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");  // base64url
  return new WebSocket(url, ["acp", `acp.bearer.${encoded}`]);  // the server picks "acp"
}
