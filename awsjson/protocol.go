package awsjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
)

// ContentType is the media type of AWS JSON 1.1 requests and answers.
const ContentType = "application/x-amz-json-1.1"

// HeaderRequestID is x-amzn-RequestId in canonical form, so it can be set
// straight into a header map. Every answer carries one; the SDKs read it
// as the request id of a call and of an error.
const HeaderRequestID = "X-Amzn-Requestid"

// HeaderErrorType is the header that carries an error's code; the SDKs
// read it before the body's __type.
const HeaderErrorType = "X-Amzn-Errortype"

// NewRequestID returns a new request id: a random UUID, as AWS uses.
func NewRequestID() string { return uuid.NewString() }

// Error codes of the protocol itself, answered before any operation runs.
const (
	CodeUnknownOperation    = "UnknownOperationException"
	CodeSerialization       = "SerializationException"
	CodeIncompleteSignature = "IncompleteSignatureException"
	CodeMissingAuthToken    = "MissingAuthenticationTokenException"
	CodeInternalFailure     = "InternalFailure"
	CodeServiceUnavailable  = "ServiceUnavailableException"
)

// Error is an AWS JSON 1.1 error answer: an HTTP status and the code and
// message of the body {"__type": Code, "message": Message}.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Write answers with e (see [WriteError]).
func (e *Error) Write(w http.ResponseWriter) { WriteError(w, e.Status, e.Code, e.Message) }

// errorBody is the body of an AWS JSON 1.1 error.
type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// WriteError answers in the AWS JSON 1.1 error shape: the code in
// X-Amzn-ErrorType and __type, in exact case, as the SDKs match it, and
// the message in "message".
func WriteError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(errorBody{Type: code, Message: message})
	WriteErrorBody(w, status, code, body)
}

// WriteErrorBody answers an error whose body the caller encoded, for the
// errors that carry more members than __type and message (it must hold
// them); the code goes in X-Amzn-ErrorType.
func WriteErrorBody(w http.ResponseWriter, status int, code string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set(HeaderErrorType, code)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// WriteResult answers 200 with an encoded result document.
func WriteResult(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// CheckHeaders applies the duplicate-header rule: a request carries at
// most one X-Amz-Target and one Authorization header, since with two a
// proxy in front and tollgate could read different operations or
// identities from one request. It returns the 400 to answer, or nil.
func CheckHeaders(h http.Header) *Error {
	if len(h["X-Amz-Target"]) > 1 {
		return &Error{http.StatusBadRequest, CodeUnknownOperation, "more than one X-Amz-Target header"}
	}
	if len(h["Authorization"]) > 1 {
		return &Error{http.StatusBadRequest, CodeIncompleteSignature, "more than one Authorization header"}
	}
	return nil
}

// AuthError is the 400 to answer for an error of [ParseAuthorization]:
// MissingAuthenticationTokenException with AWS's "Missing Authentication
// Token" for [ErrMissingAuth], else IncompleteSignatureException.
func AuthError(err error) *Error {
	if errors.Is(err, ErrMissingAuth) {
		return &Error{http.StatusBadRequest, CodeMissingAuthToken, msgMissingAuth}
	}
	return &Error{http.StatusBadRequest, CodeIncompleteSignature, err.Error()}
}

// IsContentType reports whether a Content-Type is AWS JSON 1.1,
// parameters (such as a charset) allowed.
func IsContentType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), ContentType)
}

// CheckBody returns why an AWS JSON 1.1 body is unacceptable, or "".
// The body must be empty or one JSON object under RFC 7493 (I-JSON): no
// duplicate member names and no invalid UTF-8, which parsers resolve
// differently (first or last wins, replacement characters), so an
// upstream could act on another request than the one tollgate judged.
func CheckBody(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if jsontext.Value(body).IsValid() {
		if bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
			return "request body is not a JSON object"
		}
		return ""
	}
	// The slow path, for the message only.
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	_, err := dec.ReadValue()
	if err == nil {
		_, err = dec.ReadToken()
		if err == nil || err == io.EOF {
			return "request body is more than one JSON value"
		}
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		return "request body is not valid JSON at byte " + strconv.FormatInt(synErr.ByteOffset, 10) + ": " + ClipMessage(synErr.Err.Error())
	}
	return "request body is not valid JSON: " + ClipMessage(err.Error())
}

// ClipMessage shortens an error text that may quote client input to at
// most 2×[MaxEcho] bytes.
func ClipMessage(s string) string {
	const max = 2 * MaxEcho
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
