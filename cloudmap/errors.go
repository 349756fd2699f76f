package cloudmap

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/awsjson"
)

// Error codes, exactly as the AWS SDK matches them
// (service/servicediscovery/types/errors.go).
const (
	codeCustomHealthNotFound   = "CustomHealthNotFound"
	codeDuplicateRequest       = "DuplicateRequest"
	codeInstanceNotFound       = "InstanceNotFound"
	codeInvalidInput           = "InvalidInput"
	codeNamespaceAlreadyExists = "NamespaceAlreadyExists"
	codeNamespaceNotFound      = "NamespaceNotFound"
	codeOperationNotFound      = "OperationNotFound"
	codeRequestLimitExceeded   = "RequestLimitExceeded"
	codeResourceInUse          = "ResourceInUse"
	codeResourceLimitExceeded  = "ResourceLimitExceeded"
	codeServiceAlreadyExists   = "ServiceAlreadyExists"
	codeServiceNotFound        = "ServiceNotFound"
	codeTooManyTags            = "TooManyTagsException"
	codeResourceNotFound       = "ResourceNotFoundException"
	codeAttributesLimit        = "ServiceAttributesLimitExceededException"
)

// apiError is a Cloud Map error answer. The optional members are those the
// SDK decodes for NamespaceAlreadyExists, ServiceAlreadyExists,
// DuplicateRequest and TooManyTagsException.
type apiError struct {
	Code                 string `json:"__type"`
	Message              string `json:"message"`
	CreatorRequestID     string `json:"CreatorRequestId,omitempty"`
	NamespaceID          string `json:"NamespaceId,omitempty"`
	ServiceID            string `json:"ServiceId,omitempty"`
	ServiceArn           string `json:"ServiceArn,omitempty"`
	DuplicateOperationID string `json:"DuplicateOperationId,omitempty"`
	ResourceName         string `json:"ResourceName,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// status is the HTTP status AWS answers the code with: 400 for every
// error of the API. Cloud Map's model (botocore servicediscovery,
// aws-sdk-go-v2 service/servicediscovery) declares no status for any of
// its errors, NotFound, AlreadyExists and ResourceInUse included, so AWS
// answers them all with the protocol's client-error default; SDKs read
// __type, and a client or proxy that reads the status sees what AWS sends.
func (e *apiError) status() int { return http.StatusBadRequest }

func writeError(w http.ResponseWriter, status int, e *apiError) {
	b, _ := json.Marshal(e)
	awsjson.WriteErrorBody(w, status, e.Code, b)
}

func invalid(format string, args ...any) *apiError {
	return &apiError{Code: codeInvalidInput, Message: fmt.Sprintf(format, args...)}
}

func notFound(code, what, id string) *apiError {
	return &apiError{Code: code, Message: what + " " + strconv.Quote(id) + " not found"}
}
