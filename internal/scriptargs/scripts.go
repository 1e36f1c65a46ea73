package scriptargs

// The scripts' arguments. Each field's comment is its meaning; the
// script's header comment (redisstore/lua) says what it does with it.
// Durations are milliseconds, flags "1"/"0", digests and the vendor key
// their bytes, op tags 8 bytes (redisstore.opTag).

// Claim is claim.lua's ARGV.
type Claim struct {
	ScopeVersion string `lua:"sv"`        // the gateway's scope version (decimal)
	RequestHash  string `lua:"rh"`        // 32 bytes
	Binding      string `lua:"b"`         // h header, p body_pointer, u unsupported
	Fingerprint  string `lua:"fp"`        // 32 bytes
	Route        string `lua:"route"`     // fields c, p, T, M, H, P as the record stores them
	KeySource    string `lua:"ks"`        // s supplied, m minted
	Approval     bool   `lua:"approval"`  // the tool requires approval
	Presented    string `lua:"presented"` // the caller's ticket, or ''
	Fresh        string `lua:"fresh"`     // a new ticket, if approval is required
	Op           string `lua:"op"`        // op tag
	Lease        string `lua:"lease,num"`
	Retention    string `lua:"retention,num"`
	VendorKey    string `lua:"vk"` // 16 bytes, or '' for an unsupported binding
	URetention   string `lua:"uretention,num"`
	Timeout      int    `lua:"timeout,num"` // the attempt timeout
	Refuse       bool   `lua:"refuse"`
	NoCreate     bool   `lua:"nocreate"`   // answer no_record rather than create a record
	Member       string `lua:"member"`     // the record's member in its unknown index and pending approvals buckets
	Window       int    `lua:"window,num"` // how long the vendor deduplicates on the key
	Incarnation  string `lua:"inc"`        // 8 bytes, for a record this claim makes
	MaxAttempts  int    `lua:"maxatt,num"` // the tool's max_attempts: the attempts of the slot that may leave
	// Gen is the highest generation of the record's slot the gateway has
	// seen (its sentinel, the last key); -1: the check is off.
	Gen int `lua:"gen,num"`
}

// Reserve is reserve.lua's ARGV.
type Reserve struct {
	Token       int    `lua:"token,num"`
	Op          string `lua:"op"`
	Lease       string `lua:"lease,num"`
	URetention  string `lua:"uretention,num"`
	Timeout     int    `lua:"timeout,num"`
	PrevNever   bool   `lua:"prev_never"` // the previous attempt was never sent
	Member      string `lua:"member"`
	Incarnation string `lua:"inc"`        // the caller's, or '' (not compared)
	MaxAttempts int    `lua:"maxatt,num"` // the tool's max_attempts
	// Gen is as Claim's.
	Gen int `lua:"gen,num"`
}

// Renew is renew.lua's ARGV.
type Renew struct {
	Token       int    `lua:"token,num"`
	Op          string `lua:"op"`
	Lease       string `lua:"lease,num"`
	Incarnation string `lua:"inc"`
}

// Finalize is finalize.lua's ARGV.
type Finalize struct {
	Token       int    `lua:"token,num"`
	State       string `lua:"state"` // a, r, u
	Op          string `lua:"op"`
	TTL         string `lua:"ttl,num"`
	Never       bool   `lua:"never"` // never sent
	Member      string `lua:"member"`
	Incarnation string `lua:"inc"`
	// Result is the result as set_result (common.lua) reads it: status,
	// body dropped, body, size before compression, header field/value
	// pairs (redisstore.encodeResult).
	Result []string `lua:"result"`
}

// GiveBack is giveback.lua's ARGV.
type GiveBack struct {
	Token       int    `lua:"token,num"`
	ClaimOp     string `lua:"cop"` // the claim's op tag
	Op          string `lua:"op"`
	URetention  string `lua:"uretention,num"`
	Member      string `lua:"member"`
	Incarnation string `lua:"inc"`
}

// Decide is decide.lua's ARGV.
type Decide struct {
	Ticket       string `lua:"ticket"`
	Approve      bool   `lua:"approve"`
	Op           string `lua:"op"`
	Retention    string `lua:"retention,num"`
	Member       string `lua:"member"`
	ScopeVersion string `lua:"sv"`
}

// Settle is settle.lua's ARGV.
type Settle struct {
	Attempts     int      `lua:"attempts,num"` // the attempts the operator saw
	State        string   `lua:"state"`        // a, r
	Op           string   `lua:"op"`
	Retention    string   `lua:"retention,num"`
	By           string   `lua:"who"`
	Note         string   `lua:"note"`
	Member       string   `lua:"member"`
	Margin       string   `lua:"smargin,num"` // the settle margin: the store's lease
	ScopeVersion string   `lua:"sv"`
	Result       []string `lua:"result"` // as Finalize's
}

// Index is index.lua's ARGV: op 'page' lists up to Count entries after
// (Score, Member); op 'drop' removes Member if its score is still Score.
type Index struct {
	Op     string `lua:"op"`
	Score  string `lua:"score"`
	Member string `lua:"member"`
	Count  int    `lua:"count,num"` // page only
}

// Lookup is lookup.lua's ARGV: none.
type Lookup struct{}

// Quota is quota.lua's ARGV: a token bucket's take.
type Quota struct {
	Rate  string `lua:"rate,num"`  // tokens per second (a decimal, > 0)
	Burst int    `lua:"burst,num"` // the bucket's size
	N     int    `lua:"n,num"`     // the tokens asked
}

// Account is account.lua's ARGV: bytes written into records that expire
// in TTL.
type Account struct {
	TTL   int `lua:"ttl,num"`
	Width int `lua:"width,num"` // the expiry buckets' width
	Bytes int `lua:"bytes,num"`
}

// StoredBytes is storedbytes.lua's ARGV: none.
type StoredBytes struct{}

// The Specs, one per script, with its KEYS: the record; the unknown index
// bucket of its workspace in its slot (bucket); the pending approvals
// bucket of its workspace in its slot (pending); the generation sentinel
// of its slot (gen, always the last: the store runs the body inside
// gen_wrap, lua/common.lua); the index script's one key is either bucket.
var (
	ClaimSpec    = newSpec[Claim]("claim", "record", "bucket", "pending", "gen")
	ReserveSpec  = newSpec[Reserve]("reserve", "record", "bucket", "gen")
	RenewSpec    = newSpec[Renew]("renew", "record")
	FinalizeSpec = newSpec[Finalize]("finalize", "record", "bucket")
	GiveBackSpec = newSpec[GiveBack]("giveback", "record", "bucket")
	DecideSpec   = newSpec[Decide]("decide", "record", "bucket", "pending")
	SettleSpec   = newSpec[Settle]("settle", "record", "bucket")
	IndexSpec    = newSpec[Index]("index", "bucket")
	LookupSpec   = newSpec[Lookup]("lookup", "record")
	// The quota scripts' one key is a workspace's token bucket (quota) or
	// its stored-bytes counters (bytes).
	QuotaSpec       = newSpec[Quota]("quota", "quota")
	AccountSpec     = newSpec[Account]("account", "bytes")
	StoredBytesSpec = newSpec[StoredBytes]("storedbytes", "bytes")
)

// Of is the Spec of a script by name, nil for a name without one.
func Of(script string) Args {
	for _, a := range []Args{ClaimSpec, ReserveSpec, RenewSpec, FinalizeSpec, GiveBackSpec, DecideSpec, SettleSpec, IndexSpec, LookupSpec,
		QuotaSpec, AccountSpec, StoredBytesSpec} {
		if a.Script() == script {
			return a
		}
	}
	return nil
}
