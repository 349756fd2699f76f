package awsjson_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate/awsjson"
)

// An AWS API behind the gateway reads the operation and the identity of a
// request and answers in the AWS JSON 1.1 error shape.
func Example() {
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", awsjson.ContentType)
	r.Header.Set("X-Amz-Target", "ServiceQuotasV20190624.GetServiceQuota")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/eu-west-1/servicequotas/aws4_request, SignedHeaders=host;x-amz-date, Signature=ab")
	r.Header.Set(awsjson.HeaderAccount, "111122223333") // set by the gateway

	if e := awsjson.CheckHeaders(r.Header); e != nil {
		fmt.Println(e)
		return
	}
	prefix, action, _ := awsjson.ParseTarget(r.Header.Get("X-Amz-Target"))
	id, _ := awsjson.IdentityOf(r)
	fmt.Println(prefix, action)
	fmt.Printf("%+v\n", id)

	w := httptest.NewRecorder()
	awsjson.WriteError(w, http.StatusBadRequest, "NoSuchResourceException", "no quota L-12345678")
	fmt.Println(w.Code, w.Header().Get("X-Amzn-ErrorType"), w.Body)
	// Output:
	// ServiceQuotasV20190624 GetServiceQuota
	// {AccessKeyID:AKIDEXAMPLE Account:111122223333 Region:eu-west-1}
	// 400 NoSuchResourceException {"__type":"NoSuchResourceException","message":"no quota L-12345678"}
}
