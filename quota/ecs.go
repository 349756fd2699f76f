package quota

import (
	"slices"

	"github.com/tollgate/tollgate/bucket"
)

// ecsSource is where the ecs preset's numbers come from.
const ecsSource = "https://docs.aws.amazon.com/AmazonECS/latest/APIReference/request-throttling.html"

// ecsThrottle is what ECS answers when a bucket is empty.
var ecsThrottle = Throttle{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: 400}

// ecsCategory is one row of an ECS throttling table: capacity is the
// burst rate, refill the sustained rate per second.
type ecsCategory struct {
	name     string
	capacity int64
	refill   float64
	actions  []string
	source   string // where the row comes from, when not ecsSource
}

// ecsCategories is the Amazon ECS API throttling table, identical in every
// region. Actions are spelled as the SDK model (aws-sdk-go-v2
// service/ecs) spells them.
var ecsCategories = []ecsCategory{
	{name: "cluster-modify", capacity: 20, refill: 1, actions: []string{"CreateCluster", "DeleteCluster", "PutClusterCapacityProviders", "UpdateCluster", "UpdateClusterSettings"}},
	{name: "cluster-read", capacity: 50, refill: 20, actions: []string{"DescribeClusters", "ListClusters"}},
	{name: "task-definition-modify", capacity: 20, refill: 1, actions: []string{"DeregisterTaskDefinition", "RegisterTaskDefinition"}},
	{name: "task-definition-read", capacity: 50, refill: 20, actions: []string{"DescribeTaskDefinition", "ListTaskDefinitions", "ListTaskDefinitionFamilies"}},
	{name: "task-definition-delete", capacity: 5, refill: 1, actions: []string{"DeleteTaskDefinitions"}},
	{name: "capacity-provider-modify", capacity: 10, refill: 1, actions: []string{"CreateCapacityProvider", "DeleteCapacityProvider", "UpdateCapacityProvider"}},
	{name: "capacity-provider-read", capacity: 50, refill: 20, actions: []string{"DescribeCapacityProviders"}},
	{name: "tag-modify", capacity: 20, refill: 10, actions: []string{"TagResource", "UntagResource"}},
	{name: "tag-read", capacity: 50, refill: 20, actions: []string{"ListTagsForResource"}},
	{name: "setting-modify", capacity: 10, refill: 1, actions: []string{"DeleteAccountSetting", "PutAccountSetting", "PutAccountSettingDefault"}},
	{name: "setting-read", capacity: 50, refill: 20, actions: []string{"ListAccountSettings"}},
	{name: "cluster-resource-modify", capacity: 100, refill: 40, actions: []string{"DeleteAttributes", "DeregisterContainerInstance", "ExecuteCommand", "PutAttributes", "RunTask", "StartTask", "StopTask", "UpdateContainerAgent", "UpdateContainerInstancesState"}},
	{name: "cluster-resource-read", capacity: 100, refill: 20, actions: []string{"DescribeContainerInstances", "DescribeTasks", "ListAttributes", "ListContainerInstances", "ListTasks"}},
	{name: "agent-modify", capacity: 200, refill: 120, actions: []string{"RegisterContainerInstance", "SubmitAttachmentStateChanges", "SubmitContainerStateChange", "SubmitTaskStateChange"}},
	{name: "service-modify", capacity: 50, refill: 5, actions: []string{"CreateService", "DeleteService", "UpdateService"}},
	{name: "service-read", capacity: 100, refill: 20, actions: []string{"DescribeServices", "ListServices"}},
	{name: "service-deployment", capacity: 50, refill: 20, actions: []string{"DescribeServiceDeployments", "ListServiceDeployments"}},
	{name: "service-revision", capacity: 50, refill: 20, actions: []string{"DescribeServiceRevisions"}},
	{name: "task-protection", capacity: 200, refill: 80, actions: []string{"UpdateTaskProtection", "GetTaskProtection"}},
	{name: "cluster-service-resource-read", capacity: 10, refill: 1, actions: []string{"ListServicesByNamespace"}},
}

// ecsInferred are the categories of the SDK model's operations that the
// throttling table above does not list. Each has a bucket of its own (so
// that a guess never takes from a documented bucket), sized as the
// documented category most like it.
var ecsInferred = []ecsCategory{
	{name: "task-set-modify", capacity: 50, refill: 5,
		actions: []string{"CreateTaskSet", "DeleteTaskSet", "UpdateServicePrimaryTaskSet", "UpdateTaskSet"},
		source:  "inferred: task sets are a service's deployments (EXTERNAL controller), sized as service-modify"},
	{name: "task-set-read", capacity: 100, refill: 20,
		actions: []string{"DescribeTaskSets"},
		source:  "inferred: sized as service-read"},
	{name: "service-deployment-modify", capacity: 50, refill: 5,
		actions: []string{"ContinueServiceDeployment", "StopServiceDeployment"},
		source:  "inferred: they change a service's deployment, sized as service-modify"},
	{name: "agent-discover", capacity: 200, refill: 120,
		actions: []string{"DiscoverPollEndpoint"},
		source:  "inferred: the container agent calls it beside the agent-modify actions, sized as agent-modify"},
	{name: "daemon-modify", capacity: 50, refill: 5,
		actions: []string{"CreateDaemon", "DeleteDaemon", "DeleteDaemonTaskDefinition", "RegisterDaemonTaskDefinition", "UpdateDaemon"},
		source:  "inferred: daemons are services scheduled one per instance, sized as service-modify"},
	{name: "daemon-read", capacity: 100, refill: 20,
		actions: []string{"DescribeDaemon", "DescribeDaemonDeployments", "DescribeDaemonRevisions", "DescribeDaemonTaskDefinition", "ListDaemonDeployments", "ListDaemonTaskDefinitions", "ListDaemons"},
		source:  "inferred: sized as service-read"},
	{name: "express-gateway-service-modify", capacity: 50, refill: 5,
		actions: []string{"CreateExpressGatewayService", "DeleteExpressGatewayService", "UpdateExpressGatewayService"},
		source:  "inferred: an Express service is an ECS service, sized as service-modify"},
	{name: "express-gateway-service-read", capacity: 100, refill: 20,
		actions: []string{"DescribeExpressGatewayService"},
		source:  "inferred: sized as service-read"},
	{name: "gateway-modify", capacity: 20, refill: 1,
		actions: []string{"AssociateGatewayWithCluster", "CreateGateway", "DeleteGateway", "DisassociateGatewayFromCluster", "UpdateGateway"},
		source:  "inferred: gateways are cluster-level resources, sized as cluster-modify"},
	{name: "gateway-read", capacity: 50, refill: 20,
		actions: []string{"DescribeGateway", "DescribeGatewayResources", "DescribeGatewayRoute", "ListGatewayClusterAssociations", "ListGatewayRoutes", "ListGateways"},
		source:  "inferred: sized as cluster-read"},
}

// ECSUnlisted is the ecs preset's DefaultCategory: an operation newer
// than the table, passed to an upstream (or found in a log).
const ECSUnlisted = "unlisted"

// ecsAliases are other spellings of ECS actions: the seed's table (and
// SPEC.md) spelled UpdateContainerInstancesState with an s.
var ecsAliases = map[string]string{"UpdateContainerInstancesStates": "UpdateContainerInstancesState"}

func ecsPreset() *Service {
	var cats []*Category
	for _, table := range [][]ecsCategory{ecsCategories, ecsInferred} {
		for _, c := range table {
			cats = append(cats, &Category{Name: c.name, Actions: slices.Clone(c.actions), Limit: bucket.MustLimit(c.capacity, c.refill), Source: c.source})
		}
	}
	cats = append(cats, fargateCategories()...)
	cats = append(cats, &Category{Name: ECSUnlisted, Limit: bucket.MustLimit(20, 1),
		DrawnBy: "any operation this table does not list, with an upstream: passed through",
		Source:  "tollgate's choice: the smallest documented modify rate (cluster-modify's 20 / 1 per second), one bucket for every unlisted operation"})
	s := &Service{Name: "ecs", Categories: cats, DefaultCategory: ECSUnlisted, aliases: ecsAliases,
		chargers: map[string]charger{"RunTask": chargeRunTask}}
	if err := s.index(); err != nil {
		panic(err) // the tables above are fixed; a test covers them
	}
	s.TargetPrefix = "AmazonEC2ContainerServiceV20141113"
	s.SigningName = "ecs"
	s.Throttle = ecsThrottle
	s.Source = ecsSource + "; Fargate: \"AWS Fargate throttling quotas\", Amazon ECS Developer Guide"
	return s
}
