// Package awsjson is the AWS JSON 1.1 wire protocol as tollgate's AWS APIs
// speak it: the X-Amz-Target header (Prefix.Operation), the credential
// scope of a SigV4 Authorization header (access key id, date, region,
// service), the identity a request is throttled and served as, the error
// shape (X-Amzn-ErrorType and a body of __type and message), request ids
// (x-amzn-RequestId) and the rule that a request carries each identity
// header once.
//
// It is used by the front door (package gateway) and by each AWS API
// behind it (cloudmap, servicequotas), so no API imports the gateway. It
// parses, writes and verifies SigV4 signatures ([Verifier], by AWS's
// rules, over a canonical request checked against aws-sdk-go-v2's signer
// and botocore's); the only state it holds is a Verifier's keys, their
// recent signing keys and the failures of its clients. It starts no
// goroutine and does no I/O beyond the ResponseWriter it is given.
//
// # Parsers
//
// [ParseTarget] and [ParseAuthorization] accept only what is safe to put
// in a bucket key and quote at most [MaxEcho] bytes of their input in an
// error, so a huge header is never echoed back.
package awsjson
