package quota

import (
	"bytes"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"

	"github.com/tollgate/tollgate/bucket"
)

// ec2Source is where the ec2 preset's numbers come from.
const ec2Source = "https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html (Request throttling for the Amazon EC2 API)"

// ec2ResourceIntensive are EC2's "resource-intensive actions".
var ec2ResourceIntensive = []string{"AcceptVpcPeeringConnection", "AuthorizeSecurityGroupIngress", "CancelSpotInstanceRequests",
	"CreateKeyPair", "CreateVpcPeeringConnection", "DeleteVpcPeeringConnection", "RejectVpcPeeringConnection",
	"RevokeSecurityGroupIngress", "RequestSpotInstances"}

// ec2Uncategorized are EC2's "uncategorized actions", each with a request
// bucket of its own size: capacity, refill per second.
var ec2Uncategorized = []struct {
	action   string
	capacity int64
	refill   float64
}{
	{"AcceptVpcEndpointConnections", 10, 1}, {"AdvertiseByoipCidr", 1, 0.1}, {"AssignIpv6Addresses", 100, 5},
	{"AssignPrivateIpAddresses", 100, 5}, {"AssignPrivateNatGatewayAddress", 10, 1}, {"AssociateCapacityReservationBillingOwner", 1, 0.5},
	{"AssociateEnclaveCertificateIamRole", 10, 1}, {"AssociateIamInstanceProfile", 100, 5}, {"AssociateNatGatewayAddress", 10, 1},
	{"AttachVerifiedAccessTrustProvider", 10, 2}, {"AuthorizeClientVpnIngress", 5, 2}, {"CancelDeclarativePoliciesReport", 1, 1},
	{"CopyImage", 100, 1}, {"CreateClientVpnRoute", 5, 2}, {"CreateCoipCidr", 5, 1}, {"CreateCoipPool", 5, 1},
	{"CreateDefaultSubnet", 1, 1}, {"CreateDefaultVpc", 1, 1}, {"CreateLaunchTemplateVersion", 100, 5}, {"CreateNatGateway", 10, 1},
	{"CreateNetworkInterface", 100, 5}, {"CreateRestoreImageTask", 50, 0.1}, {"CreateSnapshot", 100, 5}, {"CreateSnapshots", 100, 5},
	{"CreateSpotDatafeedSubscription", 50, 3}, {"CreateStoreImageTask", 50, 0.1}, {"CreateSubnetCidrReservation", 5, 1},
	{"CreateTags", 100, 10}, {"CreateVerifiedAccessEndpoint", 20, 4}, {"CreateVerifiedAccessGroup", 10, 2},
	{"CreateVerifiedAccessInstance", 10, 2}, {"CreateVerifiedAccessTrustProvider", 10, 2}, {"CreateVolume", 100, 5},
	{"CreateVpcEndpoint", 4, 0.3}, {"CreateVpcEndpointServiceConfiguration", 10, 1}, {"DeleteClientVpnRoute", 5, 2},
	{"DeleteCoipCidr", 5, 1}, {"DeleteCoipPool", 5, 1}, {"DeleteCoipPoolPermission", 5, 1}, {"DeleteNatGateway", 10, 1},
	{"DeleteNetworkInterface", 100, 5}, {"DeleteSnapshot", 100, 5}, {"DeleteSpotDatafeedSubscription", 50, 3},
	{"DeleteSubnetCidrReservation", 5, 1}, {"DeleteQueuedReservedInstances", 5, 5}, {"DeleteTags", 100, 10},
	{"DeleteVerifiedAccessEndpoint", 20, 4}, {"DeleteVerifiedAccessGroup", 10, 2}, {"DeleteVerifiedAccessInstance", 10, 2},
	{"DeleteVerifiedAccessTrustProvider", 10, 2}, {"DeleteVolume", 100, 5}, {"DeleteVpcEndpoints", 4, 0.3},
	{"DeleteVpcEndpointServiceConfigurations", 10, 1}, {"DeprovisionByoipCidr", 1, 0.1}, {"DeregisterImage", 100, 5},
	{"DescribeAggregateIdFormat", 10, 10}, {"DescribeByoipCidrs", 1, 0.5}, {"DescribeCapacityBlockExtensionOfferings", 10, 0.15},
	{"DescribeCapacityBlockOfferings", 10, 0.15}, {"DescribeDeclarativePoliciesReports", 5, 5}, {"DescribeHostReservations", 5, 2},
	{"DescribeHostReservationOfferings", 5, 2}, {"DescribeIdentityIdFormat", 10, 10}, {"DescribeIdFormat", 10, 10},
	{"DescribeInstanceTopology", 1, 1}, {"DescribeMovingAddresses", 1, 1}, {"DescribePrincipalIdFormat", 10, 10},
	{"DescribeReservedInstancesOfferings", 10, 10}, {"DescribeSecurityGroupReferences", 20, 5}, {"DescribeSpotDatafeedSubscription", 100, 13},
	{"DescribeSpotFleetInstances", 100, 5}, {"DescribeSpotFleetRequestHistory", 100, 5}, {"DescribeSpotFleetRequests", 50, 3},
	{"DescribeStaleSecurityGroups", 20, 5}, {"DescribeStoreImageTasks", 50, 0.5}, {"DescribeVerifiedAccessInstanceLoggingConfigurations", 10, 2},
	{"DetachVerifiedAccessTrustProvider", 10, 2}, {"DisableFastLaunch", 5, 2}, {"DisableImageBlockPublicAccess", 1, 0.1},
	{"DisableSnapshotBlockPublicAccess", 1, 0.1}, {"DisassociateCapacityReservationBillingOwner", 1, 0.5},
	{"DisassociateEnclaveCertificateIamRole", 10, 1}, {"DisassociateIamInstanceProfile", 100, 5}, {"DisassociateNatGatewayAddress", 10, 1},
	{"EnableFastLaunch", 5, 2}, {"EnableImageBlockPublicAccess", 1, 0.1}, {"EnableSnapshotBlockPublicAccess", 1, 0.1},
	{"GetAssociatedEnclaveCertificateIamRoles", 10, 1}, {"GetDeclarativePoliciesReportSummary", 5, 5}, {"GetHostReservationPurchasePreview", 5, 2},
	{"ModifyImageAttribute", 100, 5}, {"ModifyInstanceMetadataDefaults", 2, 2}, {"ModifyInstanceMetadataOptions", 100, 5},
	{"ModifyLaunchTemplate", 100, 5}, {"ModifyNetworkInterfaceAttribute", 100, 5}, {"ModifySnapshotAttribute", 100, 5},
	{"ModifyVerifiedAccessEndpoint", 20, 4}, {"ModifyVerifiedAccessEndpointPolicy", 20, 4}, {"ModifyVerifiedAccessGroup", 10, 2},
	{"ModifyVerifiedAccessGroupPolicy", 20, 4}, {"ModifyVerifiedAccessInstance", 10, 2}, {"ModifyVerifiedAccessInstanceLoggingConfiguration", 10, 2},
	{"ModifyVerifiedAccessTrustProvider", 10, 2}, {"ModifyVpcEndpoint", 4, 0.3}, {"ModifyVpcEndpointServiceConfiguration", 10, 1},
	{"MoveAddressToVpc", 1, 1}, {"ProvisionByoipCidr", 1, 0.1}, {"PurchaseCapacityBlock", 10, 0.15}, {"PurchaseCapacityBlockExtension", 10, 0.15},
	{"PurchaseHostReservation", 5, 2}, {"PurchaseReservedInstancesOffering", 5, 5}, {"RejectVpcEndpointConnections", 10, 1},
	{"RestoreAddressToClassic", 1, 1}, {"RevokeClientVpnIngress", 5, 2}, {"RunInstances", 5, 2}, {"StartDeclarativePoliciesReport", 1, 1},
	{"StartInstances", 5, 2}, {"TerminateInstances", 100, 5}, {"UnassignPrivateIpAddresses", 100, 5}, {"UnassignPrivateNatGatewayAddress", 10, 1},
	{"WithdrawByoipCidr", 1, 0.1},
}

// ec2Resource are EC2's resource token buckets: besides its request
// bucket, each of these actions takes one token per instance it acts on.
var ec2Resource = []struct {
	action   string
	capacity int64
	refill   float64
}{
	{"RunInstances", 1000, 2}, {"TerminateInstances", 1000, 20}, {"StartInstances", 1000, 2}, {"StopInstances", 1000, 20},
}

// kebab spells an action as a category name: "RunInstances" →
// "run-instances".
func kebab(action string) string {
	var b strings.Builder
	for i, r := range action {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ec2Preset is Amazon EC2's request rate limiting: every action has a
// bucket of its own, sized by its category; actions too many to list are
// sorted by the start of their name, as AWS's page sorts them.
func ec2Preset() *Service {
	cats := []*Category{
		{Name: "non-mutating", Limit: bucket.MustLimit(100, 20), PerAction: true,
			DrawnBy: "every Describe*, List*, Search* and Get* action no other category lists, each its own bucket",
			Source:  "DescribeInstances, DescribeInstanceStatus, DescribeNetworkInterfaces, DescribeSecurityGroups, DescribeSnapshots, DescribeSpotInstanceRequests and DescribeVolumes called with neither a filter nor pagination take a smaller bucket (50 / 10 per second); that needs the call's parameters, so they are charged here"},
		{Name: "mutating", Limit: bucket.MustLimit(50, 5), PerAction: true,
			DrawnBy: "every other action no category lists, each its own bucket"},
		{Name: "resource-intensive", Actions: append([]string(nil), ec2ResourceIntensive...), Limit: bucket.MustLimit(50, 5), PerAction: true},
	}
	for _, u := range ec2Uncategorized {
		cats = append(cats, &Category{Name: kebab(u.action), Actions: []string{u.action}, Limit: bucket.MustLimit(u.capacity, u.refill)})
	}
	chargers := map[string]charger{}
	for _, r := range ec2Resource {
		cats = append(cats, &Category{Name: kebab(r.action) + "-resource", Limit: bucket.MustLimit(r.capacity, r.refill),
			DrawnBy: r.action + ": one token per instance (CloudTrail requestParameters instancesSet; RunInstances its maxCount)"})
		chargers[r.action] = chargeInstances(kebab(r.action) + "-resource")
	}
	s := &Service{Name: "ec2", Categories: cats, chargers: chargers, Source: ec2Source,
		Prefixes: []Prefix{{"Describe", "non-mutating"}, {"List", "non-mutating"}, {"Search", "non-mutating"}, {"Get", "non-mutating"}, {"", "mutating"}},
		// EC2 answers HTTP 503 RequestLimitExceeded (query protocol);
		// CloudTrail logs it as Client.RequestLimitExceeded.
		Throttle:      Throttle{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", HTTPStatus: 503},
		ThrottleCodes: []string{"Client.RequestLimitExceeded"},
		SigningName:   "ec2",
	}
	if err := s.index(); err != nil {
		panic(err)
	}
	return s
}

// maxInstancesCharged bounds the tokens one call's parameters can ask of
// a resource bucket (a bucket holds 1,000).
const maxInstancesCharged = 1000

// chargeInstances charges one token per instance of an EC2 call to the
// resource bucket named category, reading CloudTrail's requestParameters
// ({"instancesSet":{"items":[…]}}): RunInstances its item's maxCount,
// the others their items. Parameters it cannot read count one instance.
func chargeInstances(category string) charger {
	return func(s *Service, body []byte, dst []Charge) ([]Charge, error) {
		cat := s.byName[category]
		return append(dst, Charge{Category: cat, Tokens: instancesIn(body)}), nil
	}
}

func instancesIn(body []byte) int64 {
	var p struct {
		InstancesSet struct {
			Items []struct {
				MaxCount *int64 `json:"maxCount"`
			} `json:"items"`
		} `json:"instancesSet"`
	}
	if len(bytes.TrimSpace(body)) == 0 || json.Unmarshal(body, &p) != nil {
		return 1
	}
	n := int64(0)
	for _, it := range p.InstancesSet.Items {
		if it.MaxCount != nil && *it.MaxCount > 0 {
			n += min(*it.MaxCount, maxInstancesCharged) // no overflow
		} else {
			n++
		}
		if n >= maxInstancesCharged {
			return maxInstancesCharged
		}
	}
	return max(n, 1)
}
