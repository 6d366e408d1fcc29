package wire

import "crypto/tls"

// TLSProblem says why HTTP/2 must not be spoken over a connection in TLS
// state st (RFC 9113 §9.2), or "". It makes the same decisions as
// golang.org/x/net/http2 for every cipher suite crypto/tls implements: TLS
// 1.2 or later, and in TLS 1.2 only ephemeral key exchange with an AEAD
// cipher. A connection that did not negotiate h2 has no problem.
func TLSProblem(st tls.ConnectionState) string {
	if st.NegotiatedProtocol != "h2" {
		return ""
	}
	if st.Version < tls.VersionTLS12 {
		return "TLS version too low"
	}
	if st.Version > tls.VersionTLS12 {
		return ""
	}
	switch st.CipherSuite {
	case tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
		return ""
	}
	return "Prohibited TLS 1.2 Cipher Suite: " + tls.CipherSuiteName(st.CipherSuite)
}
