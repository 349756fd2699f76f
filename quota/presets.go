package quota

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/suggest"
)

// Errors of lookups. They are wrapped with the name that was not found.
var (
	ErrUnknownService  = errors.New("unknown service")
	ErrUnknownAction   = errors.New("unknown action")
	ErrUnknownCategory = errors.New("unknown category")
	ErrUnknownPreset   = errors.New("unknown preset")
)

// cloudMapControlPlane lists the Cloud Map actions other than discovery
// that tollgate's registry (package cloudmap) answers.
var cloudMapControlPlane = []string{
	"CreateHttpNamespace", "CreatePrivateDnsNamespace", "CreatePublicDnsNamespace", "DeleteNamespace", "GetNamespace", "ListNamespaces",
	"UpdateHttpNamespace", "UpdatePrivateDnsNamespace", "UpdatePublicDnsNamespace",
	"CreateService", "DeleteService", "GetService", "ListServices", "UpdateService",
	"GetServiceAttributes", "UpdateServiceAttributes", "DeleteServiceAttributes",
	"RegisterInstance", "DeregisterInstance", "GetInstance", "ListInstances",
	"GetInstancesHealthStatus", "UpdateInstanceCustomHealthStatus", "GetOperation", "ListOperations",
	"ListTagsForResource", "TagResource", "UntagResource",
}

// presets builds each built-in service anew, so callers may change what
// they get (an upstream, say) without touching anyone else's copy.
var presets = map[string]func() *Service{
	"ecs":            ecsPreset,
	"ec2":            ec2Preset,
	"sts":            stsPreset,
	"ssm":            ssmPreset,
	"kms":            kmsPreset,
	"secretsmanager": secretsManagerPreset,
	"cloudmap": func() *Service {
		s, err := NewService("cloudmap", []*Category{{
			Name:    "discover-instances",
			Actions: []string{"DiscoverInstances"},
			Limit:   bucket.MustLimit(20000, 1000),
		}, {
			// AWS lists DiscoverInstancesRevision as its own quota
			// ("DiscoverInstancesRevision operation per account rate",
			// 3,000 per second, cloud-map-limits), not as a share of
			// the DiscoverInstances bucket; it names no burst, so the
			// bucket holds one second of the rate.
			Name:    "discover-instances-revision",
			Actions: []string{"DiscoverInstancesRevision"},
			Limit:   bucket.MustLimit(3000, 3000),
		}, {
			// AWS publishes no rate for the control plane; tollgate
			// gives it one bucket of 100, refilled 20 per second. A
			// throttled control-plane call answers ThrottlingException,
			// as AWS's does (RequestLimitExceeded is modelled for the
			// Discover operations only).
			Name:     "control-plane",
			Actions:  slices.Clone(cloudMapControlPlane),
			Limit:    bucket.MustLimit(100, 20),
			Throttle: &Throttle{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: 400},
		}})
		if err != nil {
			panic(err)
		}
		s.Source = "https://docs.aws.amazon.com/cloud-map/latest/dg/cloud-map-limits.html (AWS Cloud Map quotas; the control plane's bucket is tollgate's)"
		s.TargetPrefix = cloudMapTargetPrefix
		s.SigningName = "servicediscovery"
		s.Throttle = Throttle{Code: "RequestLimitExceeded", Message: "Rate exceeded", HTTPStatus: 400}
		return s
	},
	"servicequotas": func() *Service {
		// AWS publishes no numbers for the Service Quotas API's own
		// throttle; these keep a tenant's polling cheap and its
		// increase requests rare.
		s, err := NewService("servicequotas", []*Category{{
			Name:    "read",
			Actions: slices.Clone(serviceQuotasRead),
			Limit:   bucket.MustLimit(20, 10),
		}, {
			Name:    "modify",
			Actions: slices.Clone(serviceQuotasModify),
			Limit:   bucket.MustLimit(5, 1),
		}})
		if err != nil {
			panic(err)
		}
		s.TargetPrefix = ServiceQuotasTargetPrefix
		s.SigningName = "servicequotas"
		s.Throttle = Throttle{Code: "TooManyRequestsException", Message: "Rate exceeded", HTTPStatus: 400}
		return s
	},
}

// ServiceQuotasTargetPrefix is the X-Amz-Target prefix of the AWS Service
// Quotas API (botocore service-quotas/2019-06-24).
const ServiceQuotasTargetPrefix = "ServiceQuotasV20190624"

// serviceQuotasRead and serviceQuotasModify are every operation of the
// Service Quotas API (botocore service-quotas/2019-06-24), those that
// read and those that change something; package servicequotas answers
// them (some as unsupported).
var (
	serviceQuotasRead = []string{"GetAWSDefaultServiceQuota", "GetAssociationForServiceQuotaTemplate",
		"GetAutoManagementConfiguration", "GetQuotaUtilizationReport", "GetRequestedServiceQuotaChange",
		"GetServiceQuota", "GetServiceQuotaIncreaseRequestFromTemplate", "ListAWSDefaultServiceQuotas",
		"ListRequestedServiceQuotaChangeHistory", "ListRequestedServiceQuotaChangeHistoryByQuota",
		"ListServiceQuotaIncreaseRequestsInTemplate", "ListServiceQuotas", "ListServices", "ListTagsForResource"}
	serviceQuotasModify = []string{"AssociateServiceQuotaTemplate", "CreateSupportCase",
		"DeleteServiceQuotaIncreaseRequestFromTemplate", "DisassociateServiceQuotaTemplate",
		"PutServiceQuotaIncreaseRequestIntoTemplate", "RequestServiceQuotaIncrease", "StartAutoManagement",
		"StartQuotaUtilizationReport", "StopAutoManagement", "TagResource", "UntagResource", "UpdateAutoManagement"}
)

// cloudMapTargetPrefix is the X-Amz-Target prefix of AWS Cloud Map's API.
const cloudMapTargetPrefix = "Route53AutoNaming_v20170314"

// PresetNames lists the built-in services, sorted: "cloudmap", "ec2",
// "ecs", "kms", "secretsmanager", "servicequotas", "ssm", "sts".
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns a fresh copy of a built-in service: "ecs" (Amazon ECS, 20
// categories, and AWS Fargate's three buckets that a RunTask on Fargate
// also takes from: see [Service.Charges]) or "cloudmap" (AWS Cloud Map: DiscoverInstances 20,000 /
// 1,000 per second; DiscoverInstancesRevision 3,000 / 3,000 per second;
// every control-plane action in one bucket of 100 / 20 per second) or
// "servicequotas" (the AWS Service Quotas API: reads 20 / 10 per second,
// changes 5 / 1 per second, throttled with TooManyRequestsException) or
// one of the services real CloudTrail trails are made of, each from the
// AWS page its Source names: "ec2" (Amazon EC2's request buckets, one per
// action, sized by category, and the resource buckets of RunInstances,
// TerminateInstances, StartInstances and StopInstances), "sts", "ssm",
// "kms", "secretsmanager" (their published request rates, each a bucket
// holding one second of its rate). serve answers the AWS JSON ones (ssm,
// kms, secretsmanager, besides ecs, cloudmap, servicequotas); ec2 and sts
// speak the query protocol and serve only replays of their logs.
func Preset(name string) (*Service, error) {
	mk, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("%w %q%s (have %s)", ErrUnknownPreset, name, suggest.DidYouMean(name, PresetNames()), strings.Join(PresetNames(), ", "))
	}
	return mk(), nil
}

// PresetOfTargetPrefix returns the built-in service whose AWS JSON
// X-Amz-Target prefix is prefix ("cloudmap" for
// "Route53AutoNaming_v20170314"), for an error to say which preset a
// config lacks.
func PresetOfTargetPrefix(prefix string) (string, bool) {
	if prefix == "" {
		return "", false
	}
	for _, name := range PresetNames() {
		if presets[name]().TargetPrefix == prefix {
			return name, true
		}
	}
	return "", false
}

// Default returns the config tollgate serves with no file: the ecs,
// cloudmap and servicequotas presets, no overrides, so that a first run
// answers ECS, Cloud Map and the Service Quotas API through which a
// tenant asks for more.
func Default() *Config {
	ecs, _ := Preset("ecs")
	cloudmap, _ := Preset("cloudmap")
	sq, _ := Preset("servicequotas")
	c, err := NewConfig([]*Service{ecs, cloudmap, sq}, nil, nil)
	if err != nil {
		panic(err)
	}
	return c
}

// Builtin returns every built-in service in one config, no overrides:
// what replay charges a trail to when no config is given.
func Builtin() *Config {
	services := make([]*Service, 0, len(presets))
	for _, name := range PresetNames() {
		services = append(services, presets[name]())
	}
	c, err := NewConfig(services, nil, nil)
	if err != nil {
		panic(err) // the presets are fixed; a test covers them
	}
	return c
}
