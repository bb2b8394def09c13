#!/usr/bin/env bash
# Test certificates for TLS (base/tls.h), made fresh at build time so no key
# ever sits in the repository:
#   ca.pem                  the job's certificate authority
#   rank.pem, rank.key      a certificate the job's CA issued (every test rank uses it)
#   foreign-ca.pem          another authority
#   foreign.pem, foreign.key a certificate only the other authority issued
#   make_certificates.sh OUTDIR
set -euo pipefail
out=$1
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# authority NAME: a self-signed P-256 CA in $work/NAME.{pem,key}
authority() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=chorus test $1" -keyout "$work/$1.key" -out "$work/$1.pem" 2>/dev/null
}
# leaf NAME CA: a P-256 certificate NAME.{pem,key} that CA signed
leaf() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=chorus test $1" \
    -keyout "$work/$1.key" -out "$work/$1.csr" 2>/dev/null
  openssl x509 -req -days 3650 -in "$work/$1.csr" -CA "$work/$2.pem" -CAkey "$work/$2.key" \
    -CAcreateserial -out "$work/$1.pem" 2>/dev/null
}

authority ca
authority foreign-ca
leaf rank ca
leaf foreign foreign-ca
for file in ca.pem rank.pem rank.key foreign-ca.pem foreign.pem foreign.key; do
  cp "$work/$file" "$out/$file"
done
