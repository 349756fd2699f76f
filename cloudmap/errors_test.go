package cloudmap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// isA checks that err is the SDK's typed error T and returns it.
func isA[T error](t *testing.T, what string, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Errorf("%s: %T %v, want %T", what, err, err, target)
	}
	// AWS answers every Cloud Map error 400: the model declares no
	// other status for any of them (NotFound, AlreadyExists, ResourceInUse).
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("%s: %v carries no HTTP response", what, err)
	} else if re.HTTPStatusCode() != 400 {
		t.Errorf("%s: HTTP %d, want 400", what, re.HTTPStatusCode())
	}
	return target
}

func TestSDKTypedErrors(t *testing.T) {
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{Limits: cloudmap.Limits{Namespaces: 2, InstancesPerService: 2}})
	c := n.client("AKIDERR")
	ctx := context.Background()
	nsID, svcID := setup(t, c)
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("a"),
		Attributes: map[string]string{"k": "v"}})).get(t)
	plainSvc := must(c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("plain"), NamespaceId: aws.String(nsID)})).get(t)
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: plainSvc.Service.Id, InstanceId: aws.String("p"),
		Attributes: map[string]string{"k": "v"}})).get(t)

	_, err := c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String("ns-nothere")})
	isA[*types.NamespaceNotFound](t, "GetNamespace unknown", err)
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("x"), NamespaceId: aws.String("ns-nothere")})
	isA[*types.NamespaceNotFound](t, "CreateService in unknown namespace", err)
	_, err = c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("nothere"), ServiceName: aws.String("web")})
	isA[*types.NamespaceNotFound](t, "DiscoverInstances unknown namespace", err)
	_, err = c.DiscoverInstancesRevision(ctx, &sd.DiscoverInstancesRevisionInput{NamespaceName: aws.String("local"), ServiceName: aws.String("nothere")})
	isA[*types.ServiceNotFound](t, "DiscoverInstancesRevision unknown service", err)
	_, err = c.GetService(ctx, &sd.GetServiceInput{Id: aws.String("srv-nothere")})
	isA[*types.ServiceNotFound](t, "GetService unknown", err)
	_, err = c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String("srv-nothere"), InstanceId: aws.String("a"), Attributes: map[string]string{"k": "v"}})
	isA[*types.ServiceNotFound](t, "RegisterInstance unknown service", err)
	_, err = c.GetInstance(ctx, &sd.GetInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("nothere")})
	isA[*types.InstanceNotFound](t, "GetInstance unknown", err)
	_, err = c.DeregisterInstance(ctx, &sd.DeregisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("nothere")})
	isA[*types.InstanceNotFound](t, "DeregisterInstance unknown", err)
	_, err = c.GetInstancesHealthStatus(ctx, &sd.GetInstancesHealthStatusInput{ServiceId: aws.String(svcID), Instances: []string{"a", "nothere"}})
	isA[*types.InstanceNotFound](t, "GetInstancesHealthStatus unknown", err)
	_, err = c.GetOperation(ctx, &sd.GetOperationInput{OperationId: aws.String("nothere")})
	isA[*types.OperationNotFound](t, "GetOperation unknown", err)
	_, err = c.UpdateInstanceCustomHealthStatus(ctx, &sd.UpdateInstanceCustomHealthStatusInput{ServiceId: plainSvc.Service.Id,
		InstanceId: aws.String("p"), Status: types.CustomHealthStatusUnhealthy})
	isA[*types.CustomHealthNotFound](t, "UpdateInstanceCustomHealthStatus without custom config", err)

	_, err = c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("local")})
	if e := isA[*types.NamespaceAlreadyExists](t, "CreateHttpNamespace duplicate", err); e != nil && aws.ToString(e.NamespaceId) != nsID {
		t.Errorf("NamespaceAlreadyExists.NamespaceId = %q, want %q", aws.ToString(e.NamespaceId), nsID)
	}
	_, err = c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("other"), CreatorRequestId: aws.String("create-local")})
	if e := isA[*types.DuplicateRequest](t, "CreateHttpNamespace reusing a CreatorRequestId", err); e != nil && aws.ToString(e.DuplicateOperationId) == "" {
		t.Errorf("DuplicateRequest without DuplicateOperationId")
	}
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(nsID)})
	if e := isA[*types.ServiceAlreadyExists](t, "CreateService duplicate", err); e != nil && aws.ToString(e.ServiceId) != svcID {
		t.Errorf("ServiceAlreadyExists.ServiceId = %q, want %q", aws.ToString(e.ServiceId), svcID)
	}
	_, err = c.DeleteNamespace(ctx, &sd.DeleteNamespaceInput{Id: aws.String(nsID)})
	isA[*types.ResourceInUse](t, "DeleteNamespace with services", err)
	_, err = c.DeleteService(ctx, &sd.DeleteServiceInput{Id: aws.String(svcID)})
	isA[*types.ResourceInUse](t, "DeleteService with instances", err)

	must(c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("second")})).get(t)
	_, err = c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("third")})
	isA[*types.ResourceLimitExceeded](t, "third namespace over a limit of 2", err)
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("b"), Attributes: map[string]string{"k": "v"}})).get(t)
	_, err = c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("c"), Attributes: map[string]string{"k": "v"}})
	isA[*types.ResourceLimitExceeded](t, "third instance over a limit of 2", err)

	tooMany := map[string]string{}
	for i := range 31 {
		tooMany[fmt.Sprint("k", i)] = "v"
	}
	for _, tc := range []struct {
		what, want string
		call       func() error
	}{
		{"bad IPv4", "AWS_INSTANCE_IPV4", func() error {
			_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("a"),
				Attributes: map[string]string{"AWS_INSTANCE_IPV4": "300.1.1.1"}})
			return err
		}},
		{"bad port", "AWS_INSTANCE_PORT", func() error {
			_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("a"),
				Attributes: map[string]string{"AWS_INSTANCE_PORT": "0"}})
			return err
		}},
		{"31 attributes", "at most 30", func() error {
			_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("a"), Attributes: tooMany})
			return err
		}},
		{"instance id", "InstanceId", func() error {
			_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("a b"), Attributes: map[string]string{"k": "v"}})
			return err
		}},
		{"MaxResults", "MaxResults", func() error {
			_, err := c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web"), MaxResults: aws.Int32(1001)})
			return err
		}},
		{"service name", "ServiceName", func() error {
			_, err := c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("we b")})
			return err
		}},
		{"health filter", "HealthStatus", func() error {
			_, err := c.DiscoverInstances(ctx, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web"), HealthStatus: "SOMETIMES"})
			return err
		}},
		{"namespace filter name", "filter Name", func() error {
			_, err := c.ListNamespaces(ctx, &sd.ListNamespacesInput{Filters: []types.NamespaceFilter{{Name: "COLOR", Values: []string{"x"}}}})
			return err
		}},
		{"namespace filter condition", "Condition", func() error {
			_, err := c.ListNamespaces(ctx, &sd.ListNamespacesInput{Filters: []types.NamespaceFilter{{Name: types.NamespaceFilterNameType, Values: []string{"HTTP"}, Condition: types.FilterConditionBeginsWith}}})
			return err
		}},
		{"service filter condition", "Condition", func() error {
			_, err := c.ListServices(ctx, &sd.ListServicesInput{Filters: []types.ServiceFilter{{Name: types.ServiceFilterNameNamespaceId, Values: []string{nsID}, Condition: types.FilterConditionBeginsWith}}})
			return err
		}},
		{"service filter values", "Values", func() error {
			_, err := c.ListServices(ctx, &sd.ListServicesInput{Filters: []types.ServiceFilter{{Name: types.ServiceFilterNameNamespaceId, Values: []string{nsID, "ns-2"}, Condition: types.FilterConditionEq}}})
			return err
		}},
		{"next token", "NextToken", func() error {
			_, err := c.ListNamespaces(ctx, &sd.ListNamespacesInput{NextToken: aws.String("zz")})
			return err
		}},
	} {
		err := tc.call()
		if e := isA[*types.InvalidInput](t, tc.what, err); e != nil && !strings.Contains(e.ErrorMessage(), tc.want) {
			t.Errorf("%s: message %q does not name %s", tc.what, e.ErrorMessage(), tc.want)
		}
	}
}
