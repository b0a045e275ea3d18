package oauth

import (
	"fmt"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// A provider signs its ID tokens with the same keys as its access tokens, so a
// signature says nothing of which one a client sent. RFC 9068 §2.1 labels an access
// token by its header's typ, "at+jwt" (or "application/at+jwt", RFC 7515 §4.1.9), and
// §4 asks a resource server to refuse any other label. A token with no typ is taken,
// as providers that predate RFC 9068 send none; providers that label access tokens
// "JWT" (zitadel, Keycloak) are taken only when the deployment says so
// (ExternalConfig.AcceptJWTTyp). Neither label tells an ID token apart, so such a
// token that carries an ID token's own claims (nonce, at_hash: OIDC Core §2 and
// §3.1.3.6, never in an RFC 9068 access token) is refused; the audience rule refuses
// the rest, whose audience is the client, unless --oidc-audience names the client.

// jwtHeaderAlgorithms are the algorithms the header parse accepts: the signature was
// checked before, so these only let go-jose read the header.
var jwtHeaderAlgorithms = func() []jose.SignatureAlgorithm {
	algs := make([]jose.SignatureAlgorithm, len(signingAlgorithms))
	for i, a := range signingAlgorithms {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return algs
}()

// checkType refuses a verified token whose typ header says it is not an access
// token; claims are its verified claims.
func (x *External) checkType(raw string, claims *oidc.AccessTokenClaims) error {
	jws, err := jose.ParseSigned(raw, jwtHeaderAlgorithms)
	if err != nil || len(jws.Signatures) != 1 {
		return fmt.Errorf("%w: its header does not parse: %v", ErrInvalidToken, err)
	}
	typ, present := jws.Signatures[0].Protected.ExtraHeaders[jose.HeaderType]
	label, _ := typ.(string)
	switch {
	case strings.EqualFold(label, "at+jwt") || strings.EqualFold(label, "application/at+jwt"):
		return nil
	case !present || (strings.EqualFold(label, "JWT") && x.cfg.AcceptJWTTyp):
		if claims.Nonce != "" || claims.Claims["at_hash"] != nil {
			return fmt.Errorf("%w: an ID token, not an access token", ErrInvalidToken)
		}
		return nil
	}
	return fmt.Errorf("%w: typ %q is not an access token's (at+jwt)", ErrInvalidToken, label)
}
