// Connection security for the Go drivers (issue #15), read from the environment once:
// COMPAT_SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT), COMPAT_SASL_MECHANISM
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), COMPAT_SASL_USERNAME / COMPAT_SASL_PASSWORD and
// COMPAT_SSL_CA / COMPAT_SSL_CERT / COMPAT_SSL_KEY (PEM). Also the security suite's ids and
// names (COMPAT_SUITE=security, scripts/security-accept.sh).

package compat

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

var (
	SecurityProtocol = strings.ToUpper(env("COMPAT_SECURITY_PROTOCOL", "PLAINTEXT"))
	SASLMechanism    = env("COMPAT_SASL_MECHANISM", "SCRAM-SHA-512")
	SASLUsername     = os.Getenv("COMPAT_SASL_USERNAME")
	SASLPassword     = os.Getenv("COMPAT_SASL_PASSWORD")
	SSLCA            = os.Getenv("COMPAT_SSL_CA")
	SSLCert          = os.Getenv("COMPAT_SSL_CERT")
	SSLKey           = os.Getenv("COMPAT_SSL_KEY")
	// SASL and TLS say which layers the protocol has.
	SASL = strings.HasPrefix(SecurityProtocol, "SASL_")
	TLS  = strings.HasSuffix(SecurityProtocol, "SSL")

	// The security suite: its scenario ids, the topic the runner made, the transactional ids.
	SecurityScenarios = []string{"sec_produce_consume", "sec_txn_allowed", "sec_txn_denied", "sec_bad_credentials"}
	SecuritySuite     = os.Getenv("COMPAT_SUITE") == "security"
	SecTopic          = env("COMPAT_SEC_TOPIC", "sec-topic")
	SecTxnAllowed     = env("COMPAT_SEC_TXN_ALLOWED", "txn-a")
	SecTxnDenied      = env("COMPAT_SEC_TXN_DENIED", "txn-b")
)

// TLSConfig is the environment's TLS client configuration (nil without TLS); clientCert=false
// leaves the client certificate out (the SSL bad-credentials scenario).
func TLSConfig(clientCert bool) (*tls.Config, error) {
	if !TLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if SSLCA != "" {
		pem, err := os.ReadFile(SSLCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", SSLCA)
		}
		cfg.RootCAs = pool
	}
	if clientCert && SSLCert != "" && SSLKey != "" {
		pair, err := tls.LoadX509KeyPair(SSLCert, SSLKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
