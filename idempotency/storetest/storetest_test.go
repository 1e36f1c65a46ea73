package storetest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// mutantEnv names a broken memStore variant for a child test process.
const mutantEnv = "STORETEST_MUTANT"

func TestMemStore(t *testing.T) {
	mutant := os.Getenv(mutantEnv)
	Run(t, Harness{New: func(t *testing.T, cfg Config) (idempotency.Store, func(time.Duration)) {
		s := newMemStore(cfg, mutant)
		return s, s.advance
	}})
}

// TestSuiteCatchesBrokenStores runs the suite against broken stores in a
// child process and checks that the subtest guarding each rule fails.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Fatal("nested mutant run")
	}
	cases := []struct{ mutant, subtest string }{
		{"leak-token", "Claim/InProgress"},
		{"ignore-hash", "Claim/RequestMismatch"},
		{"no-cas-finalize", "Attempts/FinalizeStaleToken"},
		{"no-cas-finalize", "Lease/SlowWorkerTakenOver"},
		{"three-attempts", "Attempts/ReserveSecond"},
		{"no-opid", "Resend/Claim"},
		{"lease-never-expires", "Lease/ExpiredVendorBinding"},
		{"racy-claim", "Concurrency/OneKey"},
		{"no-retention-refresh", "Retention/FromLastChange"},
		{"client-key-to-vendor", "Claim/VendorKey"},
		{"conflict-on-final", "Claim/ReplayAfterRouteChange"},
		{"replay-current-route", "Claim/ReplayAfterRouteChange"},
		{"redispatch-other-route", "Claim/UnknownRouteChanged"},
		{"redispatch-other-route", "Claim/DestinationConflict"},
		{"never-sent-other-route", "NeverSent/RouteChanged"},
		{"never-sent-burns", "NeverSent/ReopensEveryBinding"},
		{"reserve-keeps-unsent", "NeverSent/SecondAttemptBothUnsent"},
		{"token-restart", "NeverSent/TokensNeverRestart"},
		{"never-sent-no-cas", "NeverSent/LateStaleFinalize"},
		{"renew-revives", "Renew/NeverRevives"},
		{"renew-past-deadline", "Renew/AttemptDeadline"},
		{"renew-any-token", "Renew/StaleToken"},
		{"refuse-writes", "Refuse/Missing"},
		{"refuse-ignored", "Refuse/NotFinal"},
		{"nocreate-ignored", "NoCreate/Missing"},
		{"nocreate-ignored", "NoCreate/Expired"},
		{"nocreate-refuses-existing", "NoCreate/Existing"},
		{"reservation-retention", "Retention/ReservationKeepsUnknown"},
		{"unknown-retention", "Retention/UnknownOutlivesRetention"},
		{"expiry-finalize-stale", "Lease/FinalizeAfterExpiryPath"},
		{"settle-any-state", "Settle/RefusedStates"},
		{"settle-any-state", "Settle/FromUnknown"},
		{"settle-no-cas", "Settle/AttemptCount"},
		{"settle-any-input", "Settle/BadInput"},
		{"settle-shortens-ttl", "Settle/KeepsTTL"},
		{"list-shows-all", "List/OnlyUnknown"},
		{"list-unbounded", "List/PageBound"},
		{"settle-ignores-lapsed", "Settle/LapsedLease"},
		{"list-ignores-lapsed", "List/LapsedLease"},
		{"giveback-any-claim", "GiveBack/OtherClaim"},
		{"giveback-any-claim", "GiveBack/AfterClientRetry"},
		{"giveback-after-finalize", "GiveBack/AfterFinalize"},
		{"late-claim-keeps-token", "GiveBack/LateClaimCopy"},
		{"no-rehold", "Approval/RedispatchHeld"},
		{"rehold-moves-state", "Approval/RedispatchHeld"},
		{"rehold-retention", "Approval/RedispatchHoldKeepsTTL"},
		{"deny-finalizes", "Approval/RedispatchDenied"},
		{"window-ignored", "Window/Expired"},
		{"window-no-lease", "Window/Expired"},
		{"window-from-created", "Window/FromResume"},
		{"window-from-created", "Window/NeverSent"},
		{"settle-running", "Settle/AttemptRunning"},
		{"list-no-settle-after", "Settle/AttemptRunning"},
		{"list-no-settle-after", "List/LapsedLease"},
		{"conflict-keeps-in-flight", "Lease/ExpiredOtherRoute"},
		{"lease-past-deadline", "Lease/FirstLeaseCapped"},
		{"no-retention-check", "Retention/TooShort"},
		{"no-incarnation", "Incarnation/OldWorkerAfterRecreate"},
		{"no-incarnation", "Incarnation/GiveBack"},
		{"redispatch-in-process", "InProcess/UnkeyedUnknown"},
		{"redispatch-in-process", "InProcess/RouteChanged"},
		{"keyed-never-redispatched", "InProcess/KeyedRedispatch"},
		{"keyed-window-ignored", "InProcess/KeyedWindow"},
		{"in-process-as-unsupported", "InProcess/KeepsBinding"},
		{"in-process-never-sent-burns", "InProcess/UnkeyedNeverSent"},
		{"in-process-keyed-alike", "InProcess/RouteChanged"},
		{"meta-never-redispatched", "MCP/MetaRedispatch"},
		{"meta-never-redispatched", "MCP/RouteChanged"},
		{"meta-window-ignored", "MCP/MetaWindow"},
		{"upstream-tool-dropped", "MCP/KeepsRoute"},
	}
	for _, c := range cases {
		t.Run(c.mutant+"/"+c.subtest, func(t *testing.T) {
			t.Parallel()
			parts := strings.Split(c.subtest, "/")
			cmd := exec.Command(os.Args[0], "-test.run=^TestMemStore$/^"+parts[0]+"$/^"+parts[1]+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+c.mutant)
			out, err := cmd.CombinedOutput()
			want := "--- FAIL: TestMemStore/" + c.subtest
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("the suite did not catch mutant %q in %s (exit: %v):\n%s", c.mutant, c.subtest, err, out)
			}
		})
	}
}
