package servicequotas

import (
	"context"
	"net/http"
	"regexp"
	"sync"

	"github.com/tollgate/tollgate/awsjson"
)

// Automatic Management: AWS watches an account's utilisation and sends
// AWS User Notifications before a quota runs out. tollgate has no User
// Notifications to send them to, so no account can opt in: Get, Stop and
// Update answer NoSuchResourceException, as AWS answers an account that
// has not opted in, and Start checks its input as the model does and
// then answers AccessDeniedException saying why. The utilisation itself
// is in GetQuotaUtilizationReport.

var exclusionPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9-_ /]{1,128}$`) })

// autoIn is the input of StartAutoManagement and UpdateAutoManagement.
type autoIn struct {
	OptInLevel      *string             `json:"OptInLevel"`
	OptInType       *string             `json:"OptInType"`
	NotificationArn *string             `json:"NotificationArn"`
	ExclusionList   map[string][]string `json:"ExclusionList"`
}

// check checks in as the model does; start requires the opt-in level
// and type.
func (in *autoIn) check(start bool) error {
	if start && in.OptInLevel == nil {
		return illegal("OptInLevel is required")
	}
	if in.OptInLevel != nil && *in.OptInLevel != "ACCOUNT" {
		return illegal("OptInLevel must be ACCOUNT")
	}
	if start && in.OptInType == nil {
		return illegal("OptInType is required")
	}
	if in.OptInType != nil && *in.OptInType != "NotifyOnly" && *in.OptInType != "NotifyAndAdjust" {
		return illegal("OptInType must be NotifyOnly or NotifyAndAdjust")
	}
	if a := in.NotificationArn; a != nil && (len(*a) > maxArnLen || !arnPattern().MatchString(*a)) {
		return illegal("NotificationArn " + awsjson.Clip(*a) + " is not an ARN")
	}
	for svc, codes := range in.ExclusionList {
		if !exclusionPattern().MatchString(svc) {
			return illegal("ExclusionList service " + awsjson.Clip(svc) + " is not a service code")
		}
		for _, c := range codes {
			if !exclusionPattern().MatchString(c) {
				return illegal("ExclusionList quota " + awsjson.Clip(c) + " is not a quota code")
			}
		}
	}
	return nil
}

func notOptedIn() error {
	return noSuch("this account has not opted in to Automatic Management (tollgate has no AWS User Notifications to send its notices to)")
}

func (s *Service) getAutoManagement(_ context.Context, _ awsjson.Identity, body []byte) (any, error) {
	var in struct{}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	return nil, notOptedIn()
}

func (s *Service) startAutoManagement(_ context.Context, _ awsjson.Identity, body []byte) (any, error) {
	var in autoIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := in.check(true); err != nil {
		return nil, err
	}
	return nil, &awsjson.Error{Status: http.StatusBadRequest, Code: codeAccessDenied,
		Message: "tollgate cannot start Automatic Management: it has no AWS User Notifications to send notices to; " +
			"GetQuotaUtilizationReport shows your quotas' use"}
}

func (s *Service) updateAutoManagement(_ context.Context, _ awsjson.Identity, body []byte) (any, error) {
	var in autoIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := in.check(false); err != nil {
		return nil, err
	}
	return nil, notOptedIn()
}

func (s *Service) stopAutoManagement(_ context.Context, _ awsjson.Identity, body []byte) (any, error) {
	var in struct{}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	return nil, notOptedIn()
}
