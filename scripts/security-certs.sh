#!/usr/bin/env bash
# Test certificates for a secured onelog (or Kafka) cluster on this machine (issue #15), made
# with openssl only: never for production (the CA key sits next to its certificate, unencrypted).
#
#   scripts/security-certs.sh DIR [HOSTS...]
#
# Writes, into DIR:
#   ca.pem, ca.key                the test CA (RSA 2048, 10 years)
#   node-N.pem (N = 1..NODES)     server certificate + CA chain + its PKCS#8 key in one file:
#                                 what ssl.keystore.type=PEM / ssl.keystore.location reads;
#                                 SAN IP:127.0.0.1, DNS:localhost, DNS:node-N and every HOST
#                                 (an address becomes an IP: entry, a name a DNS: entry)
#   alice.pem/.key, bob.pem/.key, admin.pem/.key
#                                 client certificates, subject CN=<name>,OU=clients,O=onelog-test
#                                 (the principal Kafka's DEFAULT mapping rule gives them), and
#                                 each one's PKCS#8 key
#   <client>.p12, truststore.p12  PKCS#12 keystores / truststore for Java clients
#   store-password                their password (also printed)
# Idempotent: files already there are kept (delete DIR to start again); a certificate whose
# key is missing is remade, and so is everything it signs when the CA is new.
# NODES (default 3): how many node certificates.
set -euo pipefail

dir="${1:?usage: security-certs.sh DIR [HOSTS...]}"
shift
hosts=("$@")
nodes="${NODES:-3}"
clients=(alice bob admin)
days=3650

command -v openssl >/dev/null 2>&1 || { echo "security-certs.sh: openssl not found" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
umask 077

# The CA; a new one invalidates everything signed by an old one.
fresh_ca=0
if [ ! -s ca.pem ] || [ ! -s ca.key ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days "$days" \
        -subj "/O=onelog-test/CN=onelog test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        2>/dev/null
    fresh_ca=1
fi

# sign NAME SUBJECT EXT_FILE: NAME.key (PKCS#8) and NAME.crt signed by the CA.
sign() {
    local name="$1" subject="$2" ext="$3"
    openssl req -new -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$name.crt" \
        -days "$days" -extfile "$ext" 2>/dev/null
    rm -f "$name.csr"
}

needs() { [ "$fresh_ca" = 1 ] || [ ! -s "$1" ]; }

for n in $(seq 1 "$nodes"); do
    needs "node-$n.pem" || continue
    san="IP:127.0.0.1,DNS:localhost,DNS:node-$n"
    for h in "${hosts[@]}"; do
        if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san+=",IP:$h"; else san+=",DNS:$h"; fi
    done
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
        "$san" >"node-$n.ext"
    sign "node-$n" "/O=onelog-test/OU=nodes/CN=node-$n" "node-$n.ext"
    # The chain first, the key last: one file for ssl.keystore.location (type PEM).
    cat "node-$n.crt" ca.pem "node-$n.key" >"node-$n.pem"
    rm -f "node-$n.crt" "node-$n.ext" "node-$n.key"
done

printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >client.ext
# openssl's -subj lists the RDNs outermost first; RFC 2253 (Kafka's principal) prints them
# reversed, so this subject reads CN=<name>,OU=clients,O=onelog-test.
for c in "${clients[@]}"; do
    needs "$c.pem" || [ ! -s "$c.key" ] || continue
    sign "$c" "/O=onelog-test/OU=clients/CN=$c" client.ext
    mv "$c.crt" "$c.pem"
    rm -f "$c.p12"
done
rm -f client.ext ca.srl

# PKCS#12 for Java clients, all under one password.
[ -s store-password ] || openssl rand -hex 12 >store-password
password="$(cat store-password)"
for c in "${clients[@]}"; do
    [ -s "$c.p12" ] && [ "$fresh_ca" = 0 ] && continue
    openssl pkcs12 -export -in "$c.pem" -inkey "$c.key" -certfile ca.pem -name "$c" \
        -out "$c.p12" -passout "pass:$password"
done
if [ ! -s truststore.p12 ] || [ "$fresh_ca" = 1 ]; then
    rm -f truststore.p12
    # A truststore entry must be a trusted certificate entry, which openssl pkcs12 cannot mark
    # for Java; keytool (from the JDK) does, so it is used when present.
    if command -v keytool >/dev/null 2>&1; then
        keytool -importcert -noprompt -alias onelog-test-ca -file ca.pem -keystore truststore.p12 \
            -storetype PKCS12 -storepass "$password" >/dev/null 2>&1
    else
        openssl pkcs12 -export -nokeys -in ca.pem -jdktrust anyExtendedKeyUsage \
            -out truststore.p12 -passout "pass:$password"
    fi
fi
chmod 644 ca.pem ./*.p12 store-password "${clients[@]/%/.pem}"
chmod 600 ./node-*.pem
chmod 600 ca.key ./*.key

echo "certificates in $(pwd): ca.pem, node-1..$nodes.pem, ${clients[*]} (.pem/.key/.p12), truststore.p12"
echo "PKCS#12 store password: $password"
