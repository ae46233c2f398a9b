// Command franzshare is the share-group (KIP-932, Kafka's queues) driver of the compatibility
// matrix for franz-go, client id franz-go-share: kgo's share consumer (kgo.ShareGroup,
// Record.Ack / Client.MarkAcks, FlushAcks, ShareAckCallback), with a plain kgo client and raw
// kmsg requests for set-up (group configs on GROUP resources, DescribeShareGroupOffsets). It runs
// the seven scenarios of the JVM driver java-4.4.0-share (harness/compat/java/src/share/java) with
// the same checks, one JSON line each. `franzshare member TOPIC GROUP MAX` is the child process
// share_member_kill kills -9 (member_kill.go).
package main

import (
	"os"
	"time"

	"onelog/compat/compat"
)

const client = "franz-go-share"

// scenarios is the share scenario list, in the order of SHARE_SCENARIOS in scripts/compat.sh.
var scenarios = []string{"share_consume_implicit", "share_explicit_ack", "share_reject_archive", "share_lock_expiry",
	"share_two_consumers", "share_member_kill", "share_leader_kill"}

var logf = compat.Log

func main() {
	if len(os.Args) > 1 && os.Args[1] == "member" {
		os.Exit(runMember(os.Args[2:]))
	}
	// The scenarios that wait for a 15 s lock or a broker's kill and restart get more room.
	compat.SetBudget("share_lock_expiry", 90*time.Second)
	compat.SetBudget("share_member_kill", 90*time.Second)
	compat.SetBudget("share_leader_kill", 180*time.Second)
	compat.RunList(client, compat.ModuleVersion("github.com/twmb/franz-go"), scenarios, []compat.Scenario{
		consumeImplicit, explicitAck, rejectArchive, lockExpiry, twoConsumers, memberKill, leaderKill,
	})
}
