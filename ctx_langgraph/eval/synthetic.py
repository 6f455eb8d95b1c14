"""A seeded, tool-heavy agent session to replay: an ops and billing support agent at work.

:func:`tool_session` writes a long session between a support engineer and an assistant that
uses four tools (:data:`TOOL_NAMES`, described by :func:`tool_specs`): order searches, invoices,
config files and shell commands, with parallel calls, failed calls that are retried, and giant
tool outputs (CSV exports, log dumps, listings of 8,000 to 16,000 characters).

Facts are planted along the way: order, ticket and invoice ids, amounts and file paths, each
stated once (by the user or inside a tool output, sometimes in the middle of a giant output),
about a subject no other message names. Some are corrected by the user much later. Every fact
gives a :class:`~ctx_langgraph.datasets.QAItem` whose ``evidence`` names the stating message (the
correction, for corrected facts) and whose ``query`` holds keywords found together in that
message only. A planted value appears nowhere else, so an answer can only come from its evidence.
"""

from __future__ import annotations

import collections
import datetime as dt
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage

from ctx_langgraph.datasets import Conversation, QAItem

__all__ = ["MAX_TURNS", "TOOL_NAMES", "tool_session", "tool_specs"]

MAX_TURNS = 2000
"""The longest session :func:`tool_session` writes (every planted subject stays unique)."""

_START = dt.datetime(2024, 3, 4, 9, 0, tzinfo=dt.timezone.utc)
_STEP = dt.timedelta(seconds=20)
_TURNS_PER_SESSION = 50
_TURNS_PER_FACT = 10
_TURNS_PER_GIANT = 20
_CORRECTION_GAP = 30
_GIANT_TARGET = (8_500, 15_000)

_TOOLS: tuple[tuple[str, str, str, str], ...] = (
    (
        "search_orders",
        "Search orders, customer accounts and billing disputes by free text: an order id, a "
        "customer or company name, a city, a status.",
        "query",
        "Free-text search terms.",
    ),
    (
        "get_invoice",
        "Fetch one invoice by id: customer, period, line items, credits and payment status.",
        "invoice_id",
        "The invoice id, such as INV-2024-0193.",
    ),
    (
        "read_file",
        "Read a text file on the ops host.",
        "path",
        "Absolute path of the file.",
    ),
    (
        "run_command",
        "Run a read-only shell command on the ops host (grep, find, journalctl, systemctl, "
        "kubectl, helpdesk, crm, backupctl, billing-export) and return its output.",
        "command",
        "The command line to run.",
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(spec[0] for spec in _TOOLS)
"""The tools the assistant calls in a :func:`tool_session`."""


def tool_specs() -> list[dict[str, Any]]:
    """Each tool's name, description and JSON schema of its arguments (a fresh copy per call).

    The shape is the one ``convert_to_openai_tool`` and ``StructuredTool`` accept.

    Example:
        >>> [spec["name"] for spec in tool_specs()]
        ['search_orders', 'get_invoice', 'read_file', 'run_command']
        >>> tool_specs()[1]["parameters"]["required"]
        ['invoice_id']
    """
    return [
        {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {argument: {"type": "string", "description": about}},
                "required": [argument],
                "additionalProperties": False,
            },
        }
        for name, description, argument, about in _TOOLS
    ]


# Subjects of planted facts. No word of these lists appears in any other text of a session.
_FACT_FIRST = (
    "Helena", "Tomasz", "Aiko", "Rafael", "Noor", "Mateo", "Sigrid", "Kwame", "Lucia", "Dario",
    "Yuki", "Amara", "Bastian", "Leila", "Oskar", "Priya", "Emeka", "Ingrid", "Tariq", "Marisol",
)  # fmt: skip
_FACT_LAST = (
    "Duarte", "Wojcik", "Tanaka", "Okonkwo", "Haddad", "Lindqvist", "Ferreira", "Abernathy",
    "Castellano", "Brandt", "Mwangi", "Szabo", "Villanueva", "Kaur", "Ostrowski", "Achterberg",
    "Nakamura", "Delacroix", "Rahman", "Eriksen", "Galloway", "Moreira", "Takahashi",
    "Halvorsen", "Quintero", "Adeyemi", "Lombardi", "Sorensen", "Petrakis", "Zielinski",
)  # fmt: skip
_FACT_CITIES = (
    "Lisbon", "Tampere", "Porto", "Ghent", "Bergen", "Valencia", "Gdansk", "Lyon", "Graz",
    "Aarhus", "Bilbao", "Turin", "Brno", "Utrecht", "Kaunas", "Malmo", "Dresden", "Limerick",
    "Trieste", "Nantes", "Seville", "Basel", "Tallinn", "Krakow", "Plovdiv", "Bologna", "Linz",
    "Riga", "Galway", "Bordeaux",
)  # fmt: skip
_FACT_COMPANY_HEAD = (
    "Bluefin", "Copperleaf", "Driftwood", "Emberline", "Foxglove", "Hollowell", "Ironbark",
    "Juniper", "Kestrel", "Larkspur", "Marigold", "Nettlefield", "Oakhaven", "Pinecrest",
    "Quillon", "Redwater", "Saltmarsh", "Thornbury", "Umbrella", "Wrenfield", "Yarrow",
    "Zephyrine", "Alderbrook", "Brambleton",
)  # fmt: skip
_FACT_COMPANY_TAIL = (
    "Dental", "Logistics", "Bakery", "Robotics", "Studios", "Outfitters", "Analytics", "Clinic",
    "Brewing", "Freight",
)  # fmt: skip
_FACT_PRODUCT_HEAD = (
    "Falcon", "Heron", "Osprey", "Marlin", "Lynx", "Puffin", "Bison", "Condor", "Ibis",
    "Jackal", "Kodiak", "Lemur", "Manta", "Narwhal", "Ocelot", "Pelican", "Quokka", "Raven",
    "Tapir", "Wombat",
)  # fmt: skip
_FACT_PRODUCT_TAIL = (
    "Relay", "Lantern", "Vault", "Pulse", "Beacon", "Orbit", "Anchor", "Prism",
)  # fmt: skip
_FACT_PROBLEMS = (
    "duplicate charges on their corporate card",
    "webhook deliveries timing out",
    "a login loop after enabling single sign-on",
    "CSV exports with broken accents",
    "tax missing from their EU invoices",
    "seats that cannot be removed",
    "a payment method that keeps being declined",
    "usage reports showing the wrong time zone",
)
_FACT_MONTHS = ("October", "November", "December", "January", "February")

# Everything else a session talks about.
_FIRST = (
    "Anna", "Ben", "Carla", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira",
    "Luca", "Mona", "Nils", "Olga", "Pavel", "Rosa", "Sven", "Tara", "Umar",
)  # fmt: skip
_LAST = (
    "Keller", "Novak", "Berg", "Lind", "Moreau", "Costa", "Fischer", "Haas", "Jansen",
    "Kowalski", "Meyer", "Nagy", "Olsen", "Petrov", "Quinn", "Rossi", "Schmidt", "Varga",
    "Weber", "Young",
)  # fmt: skip
_CITIES = (
    "Berlin", "Madrid", "Paris", "Vienna", "Oslo", "Dublin", "Prague", "Warsaw", "Milan",
    "Zurich", "Munich", "Hamburg", "Rome", "Athens", "Helsinki", "Stockholm", "Copenhagen",
    "Brussels", "Amsterdam", "Budapest",
)  # fmt: skip
_COMPANY_HEAD = (
    "Acme", "Brightside", "Cobalt", "Evergreen", "Fairway", "Harbor", "Summit", "Vertex",
    "Northstar", "Riverside", "Silverline", "Westbrook", "Sunrise", "Maple", "Pioneer",
)  # fmt: skip
_COMPANY_TAIL = (
    "Foods", "Travel", "Health", "Media", "Labs", "Systems", "Motors", "Retail", "Energy",
    "Supply",
)  # fmt: skip
_ITEMS = (
    "espresso grinder", "standing desk", "pair of noise-cancelling headphones",
    "pair of trail running shoes", "cast iron skillet", "mechanical keyboard", "e-bike battery",
    "robot vacuum", "27-inch monitor", "camping stove", "air purifier", "office chair",
    "drip coffee maker", "set of studio monitors", "carbon bike helmet", "label printer",
)  # fmt: skip
_SERVICES = (
    "billing", "payments", "invoicing", "ledger", "notify", "gateway", "reports", "auth",
    "search", "exports",
)  # fmt: skip
_ENVS = ("prod", "prod-eu", "prod-us", "staging")
_LIMIT_FILES = ("rate_limits", "limits", "throttle", "quotas", "overrides")
_INTEGRATIONS = (
    "shop_sync", "stripe_bridge", "erp_export", "tax_engine", "fx_rates", "mailer",
    "sms_gateway", "ledger_sync", "dunning", "search_index", "crm_push", "payroll_feed",
)  # fmt: skip
_CARRIERS = ("DHL", "UPS", "GLS", "DPD", "FedEx", "PostNL")
_WAREHOUSES = ("Leipzig", "Rotterdam", "Antwerp", "Poznan", "Venlo")
_PLANS = ("starter", "team", "business", "enterprise")
_TEAMS = ("platform", "billing-core", "integrations", "sre")
_TICKET_SUBJECTS = (
    "cannot download receipts",
    "invoice address wrong",
    "API key rotation question",
    "export stuck at 99 percent",
    "card expired, update needed",
    "wants annual billing",
    "seat count mismatch",
    "password reset email missing",
    "asks for a DPA copy",
    "webhook signature invalid",
    "VAT id not applied",
    "dashboard loads slowly",
)
_STATUSES = ("in transit", "out for delivery", "delivered", "waiting at the pickup point")


def _money(rng: random.Random, low: int, high: int) -> str:
    return f"${rng.randint(low, high):,}.{rng.randint(0, 99):02d}"


def _join(*parts: str) -> str:
    return " ".join(part for part in parts if part)


@dataclass(frozen=True)
class _Call:
    name: str
    args: dict[str, str]
    output: str
    error: bool = False


@dataclass(frozen=True)
class _Turn:
    request: str
    cycles: tuple[tuple[str, tuple[_Call, ...]], ...]
    reply: str
    evidence_call: int | None = None
    """Index (over the turn's calls) of the call whose output states a planted fact."""


class _Words:
    """Filler values that never collide with a planted value."""

    def __init__(self, rng: random.Random, values: set[str], paths: Sequence[str]) -> None:
        self.rng = rng
        self.values = values
        self.paths = tuple(paths)

    def pick(self, options: Sequence[str]) -> str:
        return self.rng.choice(options)

    def _fresh(self, make: Callable[[], str]) -> str:
        while True:
            value = make()
            if value not in self.values:
                return value

    def _fresh_path(self, make: Callable[[], str]) -> str:
        while True:
            value = make()
            if not any(path in value for path in self.paths):
                return value

    def order(self) -> str:
        return self._fresh(lambda: f"ORD-{self.rng.randint(10000, 99999)}")

    def ticket(self) -> str:
        return self._fresh(lambda: f"TCK-{self.rng.randint(1000, 9999)}")

    def invoice(self) -> str:
        return self._fresh(
            lambda: f"INV-{self.rng.choice((2023, 2024))}-{self.rng.randint(1, 9999):04d}"
        )

    def amount(self, low: int = 20, high: int = 4000) -> str:
        return self._fresh(lambda: _money(self.rng, low, high))

    def person(self) -> tuple[str, str]:
        return self.pick(_FIRST), self.pick(_LAST)

    def name(self) -> str:
        return " ".join(self.person())

    def company(self) -> str:
        return f"{self.pick(_COMPANY_HEAD)} {self.pick(_COMPANY_TAIL)}"

    def date(self, month: int = 2) -> str:
        return f"2024-{month:02d}-{self.rng.randint(1, 28):02d}"

    def clock(self) -> str:
        rng = self.rng
        return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"

    def config_path(self) -> str:
        rng = self.rng
        return self._fresh_path(
            lambda: (
                f"/srv/{rng.choice(_SERVICES)}/config/{rng.choice(_ENVS)}/"
                f"{rng.choice(_LIMIT_FILES)}.yaml"
            )
        )

    def backup_path(self) -> str:
        rng = self.rng
        return self._fresh_path(
            lambda: (
                f"/mnt/backups/{rng.choice(_SERVICES)}/nightly/"
                f"acct-{rng.randint(1, 99999):05d}.tar.zst"
            )
        )

    def app_path(self, service: str) -> str:
        rng = self.rng
        return self._fresh_path(
            lambda: rng.choice(
                (
                    f"/srv/{service}/app/{rng.choice(('handlers', 'jobs', 'models', 'api'))}/"
                    f"{rng.choice(('orders', 'refunds', 'retry', 'tax', 'sync', 'export'))}"
                    f"{rng.choice(('', '_v2', '_utils'))}.py",
                    f"/srv/{service}/config/{rng.choice(_ENVS)}/"
                    f"{rng.choice(('app', 'workers', 'features', 'queues'))}.yaml",
                    f"/srv/{service}/static/build/chunk-{rng.randint(0, 0xFFFFF):05x}.js",
                    f"/srv/{service}/migrations/{rng.randint(100, 420):04d}_"
                    f"{rng.choice(('add_index', 'drop_column', 'backfill', 'rename'))}.sql",
                )
            )
        )


@dataclass(frozen=True)
class _Kind:
    """A kind of planted fact: how it is stated, asked about and corrected."""

    category: str
    value: str
    subject: str
    said: str
    ask: str
    tool: str
    args: tuple[tuple[str, str], ...]
    output: str
    giant: str | None
    line: str
    question: str
    query: str
    correction: str
    correction_query: str


_KINDS: dict[str, _Kind] = {
    "order": _Kind(
        category="identifier",
        value="order",
        subject="customer",
        said="{first} {last} from {city} called again about the refund for the {item} they "
        "sent back. The order id is {value}. Nothing to do yet, just keep it in mind: they "
        "will probably call once more next week.",
        ask="Can you find the refund request from {first} {last}? They say the {item} went "
        "back two weeks ago and nothing has happened since.",
        tool="search_orders",
        args=(("query", "{last} refund"),),
        output="1 order matches:\n{value} | customer: {first} {last} | city: {city} | item: "
        "{item} | total: {amount} | status: refund_requested | return received: {date}\n",
        giant="orders",
        line='{value},{first} {last},{city},{item},"{amount}",refund_requested,{date}',
        question="What is the order id of the refund for {first} {last} from {city}?",
        query="{last} {city} refund",
        correction="Correction: the refund for {first} {last} in {city} is on order {new}, not "
        "{old}. I read the wrong line of their receipt earlier.",
        correction_query="Correction {last} {city}",
    ),
    "ticket": _Kind(
        category="identifier",
        value="ticket",
        subject="company",
        said="{company} opened support ticket {value} about {problem}. Please reference it in "
        "every reply to them so the thread stays together.",
        ask="Has anything new come in from {company} on the helpdesk? Their ops lead pinged "
        "me on chat this morning.",
        tool="run_command",
        args=(("command", "helpdesk search --customer '{company}' --status open"),),
        output="ticket     status  priority  customer                    subject\n"
        "{value}   open    {priority:<8}  {company:<26}  {problem}\n1 open item.\n",
        giant="tickets",
        line="{value:<9}  open    {priority:<8}  {company:<26}  {problem}",
        question="Which ticket did {company} open about {problem}?",
        query="{company} ticket",
        correction="Correction: {company}'s ticket about {problem} is {new}, not {old}; the "
        "first one was closed as a duplicate.",
        correction_query="Correction {company}",
    ),
    "invoice": _Kind(
        category="identifier",
        value="invoice",
        subject="company",
        said="{company} is disputing invoice {value} for their {month} usage. Please hold any "
        "dunning emails on it until finance has replied to them.",
        ask="Is {company} disputing anything with us? Their accountant hinted at it on a call "
        "yesterday.",
        tool="search_orders",
        args=(("query", "{company} dispute"),),
        output="Open disputes for {company}:\n- invoice {value} | period: {month} | amount: "
        "{amount} | status: disputed | reason: usage overcharge | opened: {date}\n",
        giant=None,
        line="",
        question="Which invoice is {company} disputing for their {month} usage?",
        query="{company} invoice {month}",
        correction="Correction: the invoice {company} is disputing for {month} is {new}, not "
        "{old}; they quoted the wrong number on the call.",
        correction_query="Correction {company} {month}",
    ),
    "credit": _Kind(
        category="amount",
        value="amount",
        subject="company",
        said="We agreed to give {company} a goodwill credit of {value} for the {month} outage. "
        "Please make sure it lands on their next invoice.",
        ask="Can you pull the latest account notes for {company}? I need them for the monthly "
        "report.",
        tool="run_command",
        args=(("command", "crm notes --account '{company}' --last 3"),),
        output="Account notes for {company} (latest first):\n{date}  {agent}: goodwill credit "
        "of {value} approved for the {month} outage.\n{date2}  {agent2}: renewal call booked, "
        "no blockers.\n{date3}  {agent}: asked for the SSO setup guide, sent.\n",
        giant="log",
        line='2024-03-{day}T{clock}.{ms}Z INFO  credits.apply account="{company}" '
        "kind=goodwill amount={value} reason={month_lower}_outage request_id={rid}",
        question="How much goodwill credit did we agree to give {company} for the {month} outage?",
        query="{company} goodwill",
        correction="Correction: the goodwill credit for {company} is {new}, not {old}; finance "
        "revised it after checking the outage window.",
        correction_query="Correction {company} goodwill",
    ),
    "balance": _Kind(
        category="amount",
        value="amount",
        subject="customer",
        said="{first} {last} in {city} says the outstanding balance on their account is "
        "{value} and wants to settle it today. I'll send them the payment link myself.",
        ask="{first} {last} wants to pay off their account today. Can you check what they owe?",
        tool="search_orders",
        args=(("query", "{first} {last} account"),),
        output="Account {acct} | {first} {last} | {city}\noutstanding balance: {value} | last "
        "payment: {date} | plan: {plan} | days overdue: {days}\n",
        giant="balances",
        line='{acct},{first} {last},{city},"{value}",{days},{plan}',
        question="What is the outstanding balance of {first} {last} from {city}?",
        query="{last} {city} balance",
        correction="Correction: {first} {last}'s outstanding balance in {city} is {new}, not "
        "{old}; one payment had been booked twice.",
        correction_query="Correction {last} {city}",
    ),
    "limits": _Kind(
        category="path",
        value="config",
        subject="product",
        said="The rate limits for the {product} integration are set in {value}, so that is "
        "the file we will have to change when we raise their quota.",
        ask="Where do we configure the throttling for the {product} integration? I'd like to "
        "raise it a little.",
        tool="run_command",
        args=(("command", "grep -rn '{slug}' /srv --include='*.yaml'"),),
        output="{value}:{lineno}:  {slug}_rate_limit: {rpm}/min  # burst {burst}, owner {team}\n",
        giant="grep",
        line="{value}:{lineno}:  {slug}_rate_limit: {rpm}/min",
        question="Which file holds the rate limits of the {product} integration?",
        query="{product} rate",
        correction="Correction: the {product} rate limits now live in {new}, not {old}; the "
        "old file is only read as a fallback.",
        correction_query="Correction {product}",
    ),
    "backup": _Kind(
        category="path",
        value="backup",
        subject="company",
        said="The nightly backup for {company} is written to {value}; restore from there if "
        "they ask for yesterday's data again.",
        ask="If {company} asks for a restore again, where would we take it from?",
        tool="run_command",
        args=(("command", "backupctl show --account '{company}'"),),
        output="account:   {company}\nbackup:    nightly at 02:{mm} UTC\ntarget:    {value}\n"
        "retention: {days} days\nlast run:  {date} 02:{mm} UTC, ok ({size} GB)\n",
        giant="backups",
        line="{company:<26}  nightly  {value}  ok      {size} GB",
        question="Where is the nightly backup of {company} written?",
        query="{company} nightly backup",
        correction="Correction: the nightly backup for {company} now goes to {new}, not {old}; "
        "the volume was migrated last week.",
        correction_query="Correction {company} backup",
    ),
}

_SAID_REPLIES = (
    "Noted, I've added it to the account notes so whoever picks up the next call has it. "
    "Nothing else needs doing on our side right now.",
    "Got it, it's on the account record now. I'll leave the case open and check on it again "
    "when they get back to us.",
    "Thanks, saved to the customer notes. If they reach out through the helpdesk instead of by "
    "phone, the agent on duty will see it too.",
    "Understood, I've recorded it. I won't change anything in billing until you tell me to.",
)
_FOUND_REPLIES = (
    "Found it, the record is above. I've linked it to the account notes so we don't have to "
    "search again next time.",
    "That's the one. Everything on it looks consistent, nothing is blocked on our side, so I'd "
    "just let the customer know we have it in front of us.",
    "Here it is. I've pinned it on the account so whoever answers next sees it straight away.",
    "There it is. No follow-up needed from us for now; I'll keep an eye on it.",
)
_CORRECTED_REPLIES = (
    "Thanks for catching that. I've updated the account notes and will only use the new value "
    "from now on; the old one is marked as wrong.",
    "Updated. The earlier value is struck through in the notes so nobody picks it up by mistake.",
    "Good to know, I've fixed the record. Anything I send from here on uses the right one.",
)

_OPENERS = (
    "", "", "", "Morning!", "Quick one:", "Next in the queue:", "Hi again.",
    "Another one from the inbox:", "Switching topics:", "Before I forget:",
)  # fmt: skip
_CLOSERS = (
    "", "Thanks!", "Thanks, no rush.", "They have emailed twice already, so sooner is better.",
    "Keep the answer short, I will paste it into my reply.",
    "Let me know if anything looks off.", "I would like to answer them before lunch.",
    "Flag it if you think finance needs to weigh in.",
)  # fmt: skip
_CONTEXTS = (
    "",
    "",
    "I'm covering the queue for a colleague today, so I don't know the history of this one.",
    "It came in through the chat widget, so the customer expects a quick answer.",
    "This is the third message about it this week, and they copied their account manager.",
    "The customer was polite but clearly frustrated, so let's get it right the first time.",
    "I'd like to close this before the afternoon handover if we can.",
    "Their contract renews next month, so it's worth keeping them happy.",
    "I checked the help center first but didn't find anything that covers this case.",
)
_FOLLOW_UPS = (
    "", "", "Want me to draft the reply to the customer?",
    "I can set a reminder to check again tomorrow morning.", "Nothing else looked unusual.",
    "Let me know if you want the details as a table.",
    "If they push back, I'd loop in finance.",
)  # fmt: skip
_PREFACES = ("", "", "", "Let me look that up.", "Checking now.", "I'll pull the record first.")

_CHATS: tuple[tuple[str, str], ...] = (
    (
        "What's our rule for refunds on annual plans after the first 30 days? {name} from "
        "{company} is asking and I don't want to promise something finance will reject.",
        "After 30 days annual plans aren't refundable in cash, but we can prorate the unused "
        "months as account credit. Finance approves credits up to {amount} without a sign-off; "
        "above that a manager has to approve. For {company} I'd offer the credit, explain the "
        "30-day window, and mention they can switch to monthly billing at renewal.",
    ),
    (
        "Can you remind me how we handle a customer who wants their invoices addressed to a "
        "different legal entity? {company} just merged with another firm.",
        "Past invoices stay as they are; we never reissue closed invoices to a new entity. From "
        "the next billing cycle the new legal name, address and VAT id go on the account, and "
        "the customer confirms the change in writing. If they need a statement for the merger "
        "audit, finance can export one covering all past invoices.",
    ),
    (
        "{name} asks whether we can split one order across two shipping addresses. Do we "
        "support that or do they need two orders?",
        "They need two orders. The warehouse system ties one shipment to one address, and "
        "splitting later breaks the tracking updates. The easiest path is to cancel the open "
        "order before it is picked and place two new ones; the payment hold is released "
        "automatically within a few days.",
    ),
    (
        "How long do we keep server logs for the {service} service? Legal asked and I'd rather "
        "not guess.",
        "Application logs for {service} are kept for 30 days in the hot store and 13 months in "
        "cold storage, then deleted. Access logs with IP addresses are cut to 90 days. If legal "
        "needs something older, only the cold archive has it, and a restore takes about a day.",
    ),
    (
        "What do I tell {company} when they ask for a discount for paying two years upfront?",
        "We offer 15% for a two-year prepayment on business and enterprise plans, nothing on "
        "starter. It has to be paid in one invoice, and seats added during the term are billed "
        "at the discounted rate. Sales owns anything beyond that, so if they want more, I'd "
        "hand the thread to their account manager.",
    ),
    (
        "Is it safe to restart the {service} worker during business hours, or should I wait "
        "for the evening window?",
        "A rolling restart is safe at any time: jobs in flight are finished or requeued, and "
        "the queue drains in a couple of minutes. Avoid a full stop between 09:00 and 11:00 UTC "
        "though, that's when the nightly reconciliations are still being picked up.",
    ),
    (
        "{name} says they were charged in euros but their contract says dollars. What's the "
        "usual way to fix the currency on an account?",
        "The currency is fixed per subscription, so we can't flip it on the live one. Support "
        "cancels the subscription at period end and creates a new one in dollars starting the "
        "next cycle; the current invoice can be credited and reissued if the contract clearly "
        "says dollars. Attach the contract page to the request for finance.",
    ),
    (
        "When a card payment fails, how many times do we retry before the account goes into "
        "dunning?",
        "Four retries over eleven days: after 1, 3, 5 and 11 days. The customer gets an email "
        "after the first and the last failure. Once the last retry fails, the account enters "
        "dunning stage 1 and the admins see a banner; nothing is suspended until stage 3.",
    ),
    (
        "Who approves a change to a customer's API rate limit? {company} wants theirs doubled "
        "for a migration weekend.",
        "A temporary raise of up to 3x for less than a week only needs the on-call engineer's "
        "approval in the ops channel. Anything bigger or permanent goes through the "
        "integrations team, because it changes the capacity plan. For a migration weekend the "
        "temporary raise is the usual route.",
    ),
    (
        "Can a customer on the team plan get SSO, or is that only for enterprise? {name} is "
        "asking again.",
        "SSO is enterprise only, but business plans can buy it as an add-on. Team plans have "
        "to upgrade to business first. I'd point out that the add-on is usually cheaper than "
        "going straight to enterprise if SSO is the only thing they need.",
    ),
)


def _order_record(words: _Words, order: str, name: str, city: str) -> tuple[str, str]:
    rng = words.rng
    status = words.pick(_STATUSES)
    carrier = words.pick(_CARRIERS)
    record = (
        f"order {order}\ncustomer: {name} ({city})\nitem: {words.pick(_ITEMS)} x"
        f"{rng.randint(1, 3)}\ntotal: {words.amount()}\nstatus: {status}\ncarrier: {carrier}, "
        f"tracking {rng.randint(10**11, 10**12 - 1)}\nshipped from: "
        f"{words.pick(_WAREHOUSES)} on {words.date(2)}\nlast event: {words.date(3)} "
        f"{words.clock()} arrival at the {words.pick(_CITIES)} hub\n"
    )
    return record, status


def _invoice_record(words: _Words, invoice: str, company: str, month: str) -> str:
    rng = words.rng
    seats = rng.randint(5, 180)
    return (
        f"invoice {invoice}\ncustomer: {company}\nperiod: {month}\nplan: {words.pick(_PLANS)}, "
        f"{seats} seats\nseats: {words.amount(100, 9000)}\napi overage: "
        f"{words.amount(0, 900)}\ntax: {words.amount(10, 2000)}\ntotal: "
        f"{words.amount(200, 12000)}\nstatus: {words.pick(('paid', 'open', 'overdue'))}, due "
        f"{words.date(3)}\n"
    )


def _config_text(words: _Words, path: str) -> str:
    rng = words.rng
    return (
        f"# {path}\nservice: {path.split('/')[2]}\nretry:\n  attempts: {rng.randint(2, 8)}\n"
        f"  backoff_seconds: {rng.choice((1, 2, 5, 10))}\ntimeouts:\n  connect_ms: "
        f"{rng.choice((500, 1000, 2000))}\n  read_ms: {rng.choice((5000, 10000, 30000))}\n"
        f"queues:\n  default: {rng.randint(2, 32)}\n  exports: {rng.randint(1, 8)}\n"
        f"features:\n  {words.pick(_INTEGRATIONS)}: {rng.choice(('true', 'false'))}\n"
        f"  {words.pick(_INTEGRATIONS)}: {rng.choice(('true', 'false'))}\n"
    )


def _status_output(words: _Words, service: str, hours: int, memory: int) -> str:
    rng = words.rng
    return (
        f"* {service}-worker.service - {service} background worker\n   Loaded: loaded "
        f"(/etc/systemd/system/{service}-worker.service; enabled)\n   Active: active "
        f"(running) since {words.date(3)} {words.clock()} UTC; {hours}h ago\n Main PID: "
        f"{rng.randint(1000, 60000)} (python3)\n    Tasks: {rng.randint(8, 64)}\n   Memory: "
        f"{memory}M\n"
    )


def _log_output(words: _Words) -> str:
    return "".join(
        f"{words.date(3)}T{words.clock()}Z "
        f"{words.pick(('INFO ', 'INFO ', 'WARN ', 'ERROR'))} job "
        f"{words.pick(('sync', 'export', 'retry', 'reconcile'))} "
        f"{words.pick(('finished', 'started', 'took 4.2s', 'retried once', 'timed out'))}\n"
        for _ in range(words.rng.randint(5, 8))
    )


def _command_case(words: _Words) -> tuple[str, str, str, str]:
    """A shell check: the request, the command, its output and the reply."""
    rng = words.rng
    service = words.pick(_SERVICES)
    choice = rng.randrange(4)
    if choice == 0:
        hours = rng.randint(2, 70)
        memory = rng.randint(180, 1900)
        output = _status_output(words, service, hours, memory)
        return (
            f"Is the {service} worker healthy? Someone in the ops channel said its queue is "
            "growing.",
            f"systemctl status {service}-worker",
            output,
            f"The {service} worker is up and has been running for {hours} hours without a "
            f"restart, using about {memory} MB. So the process itself is fine; if the queue "
            "grows, the slowdown is more likely downstream. I'd look at the gateway latency "
            "next.",
        )
    if choice == 1:
        used = rng.randint(41, 97)
        output = (
            "Filesystem      Size  Used Avail Use% Mounted on\n"
            f"/dev/nvme1n1    500G  {used * 5}G  {500 - used * 5}G  {used}% /srv/{service}\n"
        )
        verdict = "that's tight, worth cleaning up" if used > 85 else "plenty of room left"
        return (
            f"Are we running out of disk on the {service} host? The alert fired twice overnight.",
            f"df -h /srv/{service}",
            output,
            f"The {service} volume is at {used}% ({500 - used * 5} GB free), {verdict}. The "
            "alert threshold is 80%, so the overnight alerts were probably the export job "
            "writing temporary files and deleting them again.",
        )
    if choice == 2:
        lines = _log_output(words)
        return (
            f"Show me the last few lines of the {service} worker log, I want to see whether "
            "the errors stopped.",
            f"tail -n 8 /var/log/{service}/worker.log",
            lines,
            "The last lines are mostly routine job starts and finishes. There's the occasional "
            "retry, but no burst of errors like this morning, so it looks like it settled. I'd "
            "keep the alert on for another day anyway.",
        )
    ready = rng.randint(2, 6)
    output = "NAME                              READY   STATUS    RESTARTS   AGE\n" + "".join(
        f"{service}-api-{rng.randint(0, 0xFFFFFF):06x}-{rng.randint(0, 0xFFFFF):05x}   1/1     "
        f"Running   {rng.randint(0, 3)}          {rng.randint(1, 9)}d\n"
        for _ in range(ready)
    )
    return (
        f"How many {service} pods are up right now? The dashboard looks stale.",
        f"kubectl get pods -n {service}",
        output,
        f"{ready} {service} API pods are running and ready, none of them restarting in a "
        "loop. The dashboard is probably just lagging; the deployment itself looks healthy.",
    )


def _request(words: _Words, core: str) -> str:
    return _join(words.pick(_OPENERS), core, words.pick(_CONTEXTS), words.pick(_CLOSERS))


def _reply(words: _Words, core: str) -> str:
    return _join(core, words.pick(_FOLLOW_UPS))


def _chat_turn(words: _Words) -> _Turn:
    question, answer = words.rng.choice(_CHATS)
    fields = {
        "name": words.name(),
        "company": words.company(),
        "amount": words.amount(100, 600),
        "service": words.pick(_SERVICES),
    }
    return _Turn(_request(words, question.format(**fields)), (), answer.format(**fields))


def _order_turn(words: _Words) -> _Turn:
    order, (first, last), city = words.order(), words.person(), words.pick(_CITIES)
    record, status = _order_record(words, order, f"{first} {last}", city)
    core = words.pick(
        (
            "Can you check where order {order} is? {name} in {city} says the tracking page has "
            "not moved for three days.",
            "{name} from {city} wants to know whether order {order} can still be switched to "
            "express shipping.",
            "Has order {order} been delivered yet? {name} ({city}) is asking before they take a "
            "day off to wait for the courier.",
        )
    ).format(order=order, name=f"{first} {last}", city=city)
    if status == "delivered":
        reply = (
            f"Order {order} has been delivered; the carrier's last event is in the record "
            f"above. If {first} can't find the parcel, I can ask the carrier for the proof of "
            "delivery with the signature and drop-off photo."
        )
    else:
        reply = (
            f"Order {order} is {status}. The last tracking event is listed above; I'd tell "
            f"{first} to expect it within two working days, and if it hasn't moved by Friday I "
            "can open a trace with the carrier."
        )
    call = _Call("search_orders", {"query": order}, record)
    return _Turn(_request(words, core), ((words.pick(_PREFACES), (call,)),), _reply(words, reply))


def _invoice_turn(words: _Words) -> _Turn:
    invoice, company, month = words.invoice(), words.company(), words.pick(_FACT_MONTHS)
    core = words.pick(
        (
            "{company} asked why their {month} invoice is higher than usual. It's {invoice}. "
            "Can you break it down for me?",
            "Finance wants to know whether {invoice} from {company} has been paid. Their "
            "controller says the transfer went out last week.",
            "{company} needs a copy of {invoice} with the line items; their procurement tool "
            "rejected the summary version.",
        )
    ).format(company=company, month=month, invoice=invoice)
    reply = words.pick(
        (
            "The breakdown is above: seats, API overage and tax. The seat price didn't change; "
            "the difference is the overage, which started when their sync job began retrying.",
            "Its status and due date are in the record above. If the transfer went out last "
            "week it may simply not be matched yet; finance reconciles bank payments twice a "
            "week.",
            "The line items are all there. I can send the itemized PDF from the billing portal "
            "to their procurement address if you give me the go-ahead.",
        )
    )
    call = _Call(
        "get_invoice", {"invoice_id": invoice}, _invoice_record(words, invoice, company, month)
    )
    return _Turn(_request(words, core), ((words.pick(_PREFACES), (call,)),), _reply(words, reply))


def _file_turn(words: _Words) -> _Turn:
    path = f"/etc/{words.pick(_SERVICES)}/{words.pick(('worker', 'api', 'scheduler'))}.yaml"
    core, reply = words.rng.choice(
        (
            (
                "What does {path} say about retries right now? I want to be sure last night's "
                "deploy did not change the backoff.",
                "The retry and timeout settings are as listed above and match what we had "
                "before the deploy, so the release didn't touch them.",
            ),
            (
                "Can you read {path}? I need the timeout values for the incident write-up.",
                "The timeouts are in the file above: connect and read, both unchanged since "
                "January. You can quote them as they are in the write-up.",
            ),
            (
                "Please open {path} and tell me which features are switched on there.",
                "Two feature switches are set in that file; see the features block above. "
                "Nothing else in it looks unusual.",
            ),
        )
    )
    core = core.format(path=path)
    call = _Call("read_file", {"path": path}, _config_text(words, path))
    return _Turn(_request(words, core), ((words.pick(_PREFACES), (call,)),), _reply(words, reply))


def _command_turn(words: _Words) -> _Turn:
    request, command, output, reply = _command_case(words)
    call = _Call("run_command", {"command": command}, output)
    return _Turn(
        _request(words, request), ((words.pick(_PREFACES), (call,)),), _reply(words, reply)
    )


def _parallel_turn(words: _Words) -> _Turn:
    rng = words.rng
    count = rng.choice((2, 2, 3))
    choice = rng.randrange(3)
    if choice == 0:
        company = words.company()
        months = rng.sample(_FACT_MONTHS, count)
        invoices = [words.invoice() for _ in months]
        request = (
            f"{company} says their last {count} invoices don't add up. Can you pull "
            f"{', '.join(invoices[:-1])} and {invoices[-1]} and compare them?"
        )
        calls = tuple(
            _Call("get_invoice", {"invoice_id": inv}, _invoice_record(words, inv, company, m))
            for inv, m in zip(invoices, months, strict=True)
        )
        reply = (
            f"I compared the {count} invoices side by side. The seat count is stable; what "
            "moves is the API overage, which roughly doubles in the most recent one. Tax is "
            "consistent with their country rate, so nothing is miscalculated, it's usage."
        )
    elif choice == 1:
        first, last = words.person()
        orders = [words.order() for _ in range(count)]
        city = words.pick(_CITIES)
        request = (
            f"{first} {last} in {city} has {count} orders open: {', '.join(orders[:-1])} and "
            f"{orders[-1]}. Which of them have shipped?"
        )
        calls = tuple(
            _Call(
                "search_orders", {"query": o}, _order_record(words, o, f"{first} {last}", city)[0]
            )
            for o in orders
        )
        reply = (
            f"I checked all {count} orders. Their statuses are in the records above; the "
            f"ones in transit should arrive this week. I'd send {first} the tracking links in "
            "one email rather than separately."
        )
    else:
        service = words.pick(_SERVICES)
        path = f"/etc/{service}/worker.yaml"
        checks = [
            _Call("read_file", {"path": path}, _config_text(words, path)),
            _Call(
                "run_command",
                {"command": f"systemctl status {service}-worker"},
                _status_output(words, service, rng.randint(1, 9), rng.randint(180, 1900)),
            ),
            _Call(
                "run_command",
                {"command": f"journalctl -u {service}-worker -n 8 --no-pager"},
                _log_output(words),
            ),
        ]
        calls = tuple(checks[:count])
        request = (
            f"The {service} worker restarted twice overnight. Check its config and its "
            "current status at the same time, please, I want to see if the two are related."
        )
        reply = (
            f"The config and the live status of the {service} worker are above. The retry "
            "settings are conservative, and the worker has been stable since the last restart. "
            "I don't see a link between the restarts and the configuration."
        )
    preface = words.pick(("", "I'll pull these in parallel.", "Checking them all at once."))
    return _Turn(_request(words, request), ((preface, calls),), _reply(words, reply))


def _chain_turn(words: _Words) -> _Turn:
    company, invoice, month = words.company(), words.invoice(), words.pick(_FACT_MONTHS)
    found = (
        f"2 results for '{company}':\n- account {company} | plan: {words.pick(_PLANS)} | "
        f"owner: {words.name()}\n- invoice {invoice} | period: {month} | status: open\n"
    )
    request = (
        f"{company} says we billed them twice this month. Can you find their latest invoice "
        "and check it?"
    )
    cycles = (
        ("", (_Call("search_orders", {"query": company}, found),)),
        (
            "Their latest invoice is in the results; fetching it.",
            (
                _Call(
                    "get_invoice",
                    {"invoice_id": invoice},
                    _invoice_record(words, invoice, company, month),
                ),
            ),
        ),
    )
    reply = (
        f"They were not billed twice: {company} has one open invoice for {month}, shown above. "
        "The second charge they see is most likely the card pre-authorization, which drops off "
        "their statement within a few days."
    )
    return _Turn(_request(words, request), cycles, _reply(words, reply))


def _retry_turn(words: _Words) -> _Turn:
    rng = words.rng
    choice = rng.randrange(4)
    if choice == 0:
        invoice, company = words.invoice(), words.company()
        year, number = invoice[4:8], invoice[9:]
        wrong = f"inv-{year}-{int(number)}"
        request = (
            f"{company} wants to know if their invoice {wrong} was paid, that's how they wrote "
            "it in their email."
        )
        bad = _Call(
            "get_invoice",
            {"invoice_id": wrong},
            f"Error: invoice '{wrong}' not found. Invoice ids look like INV-YYYY-NNNN.",
            error=True,
        )
        good = _Call(
            "get_invoice",
            {"invoice_id": invoice},
            _invoice_record(words, invoice, company, words.pick(_FACT_MONTHS)),
        )
        retry = "The id needs the canonical format; trying again."
        reply = (
            "Once written in the canonical form the invoice came up; its payment status is above."
        )
    elif choice == 1:
        service = words.pick(_SERVICES)
        good_path = f"/etc/{service}/worker.yaml"
        wrong = good_path.replace("/etc/", "/etc/conf/")
        request = (
            f"Can you check the {service} worker config? I think it's under /etc/conf somewhere."
        )
        bad = _Call(
            "read_file",
            {"path": wrong},
            f"Error: [Errno 2] No such file or directory: '{wrong}'",
            error=True,
        )
        good = _Call("read_file", {"path": good_path}, _config_text(words, good_path))
        retry = "Not there; the worker configs live directly under /etc."
        reply = "Found it directly under /etc; the settings are above and look like the defaults."
    elif choice == 2:
        service = words.pick(_SERVICES)
        typo = words.pick(("sytemctl", "systemclt", "sysctl"))
        request = f"Is the {service} worker still running after the restart this morning?"
        bad = _Call(
            "run_command",
            {"command": f"{typo} status {service}-worker"},
            f"Error: /bin/sh: 1: {typo}: not found (exit status 127)",
            error=True,
        )
        good = _Call(
            "run_command",
            {"command": f"systemctl status {service}-worker"},
            _status_output(words, service, rng.randint(1, 6), rng.randint(180, 1900)),
        )
        retry = "Typo in the command; running it again."
        reply = f"Yes, the {service} worker is running; its status is above."
    else:
        first, last = words.person()
        city = words.pick(_CITIES)
        request = f"{first} {last} from {city} called about a late delivery. Can you find it?"
        bad = _Call(
            "search_orders",
            {"query": "late delivery"},
            f"Error: the query matched {rng.randint(2000, 15000):,} orders; add a customer "
            "name, a city or an order id.",
            error=True,
        )
        order = words.order()
        good = _Call(
            "search_orders",
            {"query": f"{first} {last} {city}"},
            _order_record(words, order, f"{first} {last}", city)[0],
        )
        retry = "Too broad; narrowing it down to the customer."
        reply = f"It's order {order}; the latest tracking event is in the record above."
    first_cycle: tuple[_Call, ...] = (bad,)
    if rng.random() < 0.3:
        first_cycle = (bad, _Call(*_extra_check(words)))
    cycles = ((words.pick(_PREFACES), first_cycle), (retry, (good,)))
    return _Turn(_request(words, request), cycles, _reply(words, reply))


def _extra_check(words: _Words) -> tuple[str, dict[str, str], str]:
    _, command, output, _ = _command_case(words)
    return "run_command", {"command": command}, output


_FILLERS: tuple[tuple[Callable[[_Words], _Turn], int], ...] = (
    (_chat_turn, 22),
    (_order_turn, 14),
    (_invoice_turn, 12),
    (_file_turn, 9),
    (_command_turn, 10),
    (_parallel_turn, 13),
    (_chain_turn, 8),
    (_retry_turn, 12),
)


# Giant outputs: (request, tool, args, header, row maker, reply with {rows}).
@dataclass(frozen=True)
class _Giant:
    request: str
    tool: str
    args: tuple[tuple[str, str], ...]
    header: str
    row: Callable[[_Words], str]
    reply: str


def _giant_order_row(words: _Words) -> str:
    return (
        f"{words.order()},{words.name()},{words.pick(_CITIES)},{words.pick(_ITEMS)},"
        f'"{words.amount()}",refund_requested,{words.date(words.rng.randint(1, 2))}'
    )


def _giant_ticket_row(words: _Words) -> str:
    priority = words.pick(("low", "normal", "normal", "high"))
    return f"{words.ticket():<9}  open    {priority:<8}  {words.company():<26}  {words.pick(_TICKET_SUBJECTS)}"


def _giant_log_row(words: _Words) -> str:
    rng = words.rng
    stamp = f"2024-03-{rng.randint(1, 3):02d}T{words.clock()}.{rng.randint(0, 999):03d}Z"
    rid = f"{rng.randint(0, 0xFFFFFFFF):08x}"
    event = rng.randrange(5)
    if event == 0:
        return (
            f'{stamp} INFO  credits.apply account="{words.company()}" kind='
            f"{words.pick(('goodwill', 'proration', 'promo'))} amount={words.amount()} "
            f"request_id={rid}"
        )
    if event == 1:
        return f"{stamp} ERROR gateway.charge timeout after 30000 ms attempt={rng.randint(1, 4)} request_id={rid}"
    if event == 2:
        return f"{stamp} WARN  queue.depth billing-jobs={rng.randint(100, 9000)} threshold=5000"
    if event == 3:
        return (
            f"{stamp} INFO  invoice.render invoice={words.invoice()} pages={rng.randint(1, 9)} "
            f"ms={rng.randint(40, 900)}"
        )
    return f"{stamp} INFO  worker.heartbeat pid={rng.randint(1000, 60000)} jobs_done={rng.randint(0, 500)}"


def _giant_balance_row(words: _Words) -> str:
    rng = words.rng
    return (
        f"ACC-{rng.randint(0, 999999):06d},{words.name()},{words.pick(_CITIES)},"
        f'"{words.amount()}",{rng.randint(1, 120)},{words.pick(_PLANS)}'
    )


def _giant_grep_row(words: _Words) -> str:
    rng = words.rng
    return (
        f"{words.config_path()}:{rng.randint(3, 80)}:  {words.pick(_INTEGRATIONS)}_rate_limit: "
        f"{rng.choice((60, 120, 300, 600, 1200))}/min"
    )


def _giant_backup_row(words: _Words) -> str:
    status = words.pick(("ok    ", "ok    ", "ok    ", "failed"))
    return (
        f"{words.company():<26}  nightly  {words.backup_path()}  {status}  "
        f"{words.rng.randint(1, 900)} GB"
    )


def _giant_find_row(words: _Words) -> str:
    service = words.pick(_SERVICES)
    return f"{words.rng.randint(120, 900000):>8} {words.date(3)} {words.app_path(service)}"


def _giant_catalog_row(words: _Words) -> str:
    rng = words.rng
    return (
        f"  - sku: {words.pick(_PLANS)}-{rng.randint(100, 999)}\n    name: "
        f"{words.pick(_PLANS).title()} {rng.choice(('Monthly', 'Annual', 'Two-year'))}\n"
        f"    price: {words.amount(5, 900)}\n    seats_included: {rng.randint(1, 50)}\n"
        f"    api_calls: {rng.choice((10_000, 50_000, 250_000, 1_000_000))}"
    )


_GIANTS: dict[str, _Giant] = {
    "orders": _Giant(
        "Export every order that is still waiting for a refund, as CSV. Finance wants to see "
        "which ones are older than a week before their Thursday review.",
        "run_command",
        (("command", "billing-export orders --status refund_requested --format csv"),),
        "order_id,customer,city,item,total,status,updated",
        _giant_order_row,
        "The export lists {rows} orders waiting for a refund. Most were opened in February, so "
        "finance will want to start with those. I can sort them by age or group them by "
        "warehouse if that helps for Thursday.",
    ),
    "tickets": _Giant(
        "Give me the full list of open helpdesk tickets. I want to rebalance the queue before "
        "the weekly sync.",
        "run_command",
        (("command", "helpdesk list --status open --limit 500"),),
        "ticket     status  priority  customer                    subject",
        _giant_ticket_row,
        "There are {rows} open tickets in the queue. About a quarter are high priority; many "
        "of the rest are billing questions that the new FAQ page would answer. I'd split the "
        "high-priority ones evenly across the three agents on shift.",
    ),
    "log": _Giant(
        "The billing worker was flaky last night. Dump its journal since Friday so we can see "
        "what happened.",
        "run_command",
        (("command", "journalctl -u billing-worker --since '2024-03-01 00:00' --no-pager"),),
        "-- Journal begins at Fri 2024-03-01 00:00:00 UTC. --",
        _giant_log_row,
        "I went through the {rows} journal lines. The errors are gateway charge timeouts in "
        "short bursts, and the queue-depth warnings follow each burst. Credits and invoice "
        "renders went through normally, so it's the payment gateway, not the worker.",
    ),
    "balances": _Giant(
        "Pull all overdue account balances as CSV, collections wants to plan this week's calls.",
        "run_command",
        (("command", "billing-export balances --overdue --format csv"),),
        "account,customer,city,outstanding_balance,days_overdue,plan",
        _giant_balance_row,
        "There are {rows} overdue accounts in the export. I'd suggest collections start with the "
        "ones more than 60 days overdue on business and enterprise plans; the starter accounts "
        "can get the automated reminder first.",
    ),
    "grep": _Giant(
        "Show me every rate_limit setting across the services, we're reviewing quotas after "
        "the traffic spike.",
        "run_command",
        (("command", "grep -rn 'rate_limit' /srv --include='*.yaml'"),),
        "",
        _giant_grep_row,
        "That's {rows} rate_limit settings across the config tree. Most integrations sit at "
        "300 or 600 per minute; the ones at 60 are the likely bottlenecks during the spike.",
    ),
    "backups": _Giant(
        "List all backup targets and their last status. I want to confirm nothing failed over "
        "the weekend.",
        "run_command",
        (("command", "backupctl list --all"),),
        "backup targets: account, schedule, target, last status, size",
        _giant_backup_row,
        "{rows} backup targets are listed. A handful report a failed last run; all of them "
        "are on the same storage node, so I'd check that node before rerunning them one by one.",
    ),
    "find": _Giant(
        "What changed on the ops host since the last deploy? List the files, please.",
        "run_command",
        (("command", "find /srv -type f -newer /srv/.last-deploy -printf '%s %TF %p\\n'"),),
        "",
        _giant_find_row,
        "{rows} files changed since the last deploy: mostly rebuilt static chunks, a few "
        "handlers and some migrations. Nothing outside the application directories was touched.",
    ),
    "catalog": _Giant(
        "Open the product catalog file, I need to check how the plans are defined.",
        "read_file",
        (("path", "/srv/billing/catalog/plans.yaml"),),
        "# plan catalog\nplans:",
        _giant_catalog_row,
        "The catalog defines {rows} plan variants. Prices and included seats differ per "
        "billing period; the annual and two-year variants carry the discount in the price "
        "itself rather than as a separate coupon.",
    ),
}


def _giant_turn(words: _Words, giant: _Giant, planted: str | None) -> _Turn:
    rng = words.rng
    target = rng.randint(*_GIANT_TARGET)
    rows: list[str] = []
    size = len(giant.header)
    while size < target:
        rows.append(giant.row(words))
        size += len(rows[-1]) + 1
    if planted is not None:
        rows.insert(len(rows) // 2, planted)
    body = "\n".join(rows) + "\n"
    output = f"{giant.header}\n{body}" if giant.header else body
    args = dict(giant.args)
    call = _Call(giant.tool, args, output)
    preface = words.pick(("", "Running it now.", "This will be long."))
    return _Turn(
        _request(words, giant.request),
        ((preface, (call,)),),
        giant.reply.format(rows=len(rows)),
        evidence_call=0 if planted is not None else None,
    )


@dataclass
class _Fact:
    kind: _Kind
    turn: int
    mode: str
    """``said`` (the user states it), ``tool`` (a tool output) or ``giant`` (a giant output)."""
    fields: dict[str, Any] = field(default_factory=dict)
    correction_turn: int | None = None
    evidence: str = ""
    correction_evidence: str = ""


def _pick_turns(rng: random.Random, turns: int, count: int, taken: set[int]) -> list[int]:
    """``count`` free turns, about 60% of them in the first half."""
    free = [t for t in range(1, turns + 1) if t not in taken]
    half = turns / 2
    first = [t for t in free if t <= half]
    second = [t for t in free if t > half]
    chosen = rng.sample(first, min(len(first), math.ceil(0.6 * count)))
    chosen += rng.sample(second, min(len(second), count - len(chosen)))
    rest = [t for t in free if t not in chosen]
    chosen += rng.sample(rest, min(len(rest), count - len(chosen)))
    return chosen


def _cycled(rng: random.Random, options: Sequence[str], count: int) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        round_ = list(options)
        rng.shuffle(round_)
        out.extend(round_)
    return out[:count]


def _new_value(rng: random.Random, kind: str, taken: set[str]) -> str:
    while True:
        if kind == "order":
            value = f"ORD-{rng.randint(10000, 99999)}"
        elif kind == "ticket":
            value = f"TCK-{rng.randint(1000, 9999)}"
        elif kind == "invoice":
            value = f"INV-{rng.choice((2023, 2024))}-{rng.randint(1, 9999):04d}"
        elif kind == "amount":
            value = _money(rng, 100, 9999)
        elif kind == "config":
            value = (
                f"/srv/{rng.choice(_SERVICES)}/config/{rng.choice(_ENVS)}/"
                f"{rng.choice(_LIMIT_FILES)}.yaml"
            )
        else:
            value = f"/mnt/backups/{rng.choice(_SERVICES)}/nightly/acct-{rng.randint(1, 99999):05d}.tar.zst"
        if value not in taken:
            taken.add(value)
            return value


class _Subjects:
    """Unique subjects: the n-th customer, company or product differs from all earlier ones."""

    def __init__(self, rng: random.Random) -> None:
        def shuffled(options: Sequence[str]) -> list[str]:
            out = list(options)
            rng.shuffle(out)
            return out

        self.first = shuffled(_FACT_FIRST)
        self.last = shuffled(_FACT_LAST)
        self.cities = shuffled(_FACT_CITIES)
        self.company_head = shuffled(_FACT_COMPANY_HEAD)
        self.company_tail = shuffled(_FACT_COMPANY_TAIL)
        self.product_head = shuffled(_FACT_PRODUCT_HEAD)
        self.product_tail = shuffled(_FACT_PRODUCT_TAIL)
        self.counts = {"customer": 0, "company": 0, "product": 0}

    @staticmethod
    def _pair(n: int, heads: Sequence[str], tails: Sequence[str]) -> tuple[str, str]:
        # n -> (n mod H, (n mod H + n div H) mod T) is one-to-one while n div H < T.
        head = n % len(heads)
        return heads[head], tails[(head + n // len(heads)) % len(tails)]

    def next(self, subject: str) -> dict[str, str]:
        n = self.counts[subject]
        self.counts[subject] = n + 1
        if subject == "customer":
            last, city = self._pair(n, self.last, self.cities)
            return {"first": self.first[n % len(self.first)], "last": last, "city": city}
        if subject == "company":
            return {"company": " ".join(self._pair(n, self.company_head, self.company_tail))}
        head, tail = self._pair(n, self.product_head, self.product_tail)
        return {"product": f"{head} {tail}", "slug": f"{head}_{tail}".lower()}


def _fact_fields(words: _Words, fact: _Fact) -> dict[str, Any]:
    rng = words.rng
    month = words.pick(_FACT_MONTHS)
    return {
        "item": words.pick(_ITEMS),
        "amount": words.amount(),
        "date": words.date(2),
        "date2": words.date(1),
        "date3": words.date(1),
        "day": f"{rng.randint(1, 3):02d}",
        "clock": words.clock(),
        "ms": f"{rng.randint(0, 999):03d}",
        "rid": f"{rng.randint(0, 0xFFFFFFFF):08x}",
        "month": month,
        "month_lower": month.lower(),
        "problem": words.pick(_FACT_PROBLEMS),
        "priority": words.pick(("normal", "high", "urgent")),
        "agent": words.name(),
        "agent2": words.name(),
        "acct": f"ACC-{rng.randint(0, 999999):06d}",
        "plan": words.pick(_PLANS),
        "days": rng.randint(7, 90),
        "rpm": rng.choice((90, 150, 450, 900)),
        "burst": rng.choice((20, 40, 80)),
        "team": words.pick(_TEAMS),
        "lineno": rng.randint(5, 60),
        "mm": f"{rng.randint(0, 59):02d}",
        "size": rng.randint(2, 400),
        **fact.fields,
    }


def _fact_turn(words: _Words, fact: _Fact) -> _Turn:
    kind, fields = fact.kind, fact.fields
    if fact.mode == "said":
        return _Turn(kind.said.format(**fields), (), words.pick(_SAID_REPLIES))
    if fact.mode == "giant":
        assert kind.giant is not None
        return _giant_turn(words, _GIANTS[kind.giant], kind.line.format(**fields))
    args = {key: template.format(**fields) for key, template in kind.args}
    call = _Call(kind.tool, args, kind.output.format(**fields))
    return _Turn(
        _request(words, kind.ask.format(**fields)),
        ((words.pick(_PREFACES), (call,)),),
        words.pick(_FOUND_REPLIES),
        evidence_call=0,
    )


class _Writer:
    """Turns into messages with stable ids and times."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.created_at: list[dt.datetime] = []
        self.sessions: list[tuple[int, int]] = []
        self._clock = _START

    def session(self, number: int) -> None:
        if self.sessions:
            self.sessions[-1] = (self.sessions[-1][0], len(self.messages))
        self.sessions.append((len(self.messages), len(self.messages)))
        self._clock = _START + dt.timedelta(days=number)

    def close(self) -> None:
        self.sessions[-1] = (self.sessions[-1][0], len(self.messages))

    def _add(self, message: BaseMessage) -> None:
        self.messages.append(message)
        self.created_at.append(self._clock)
        self._clock += _STEP

    def turn(self, number: int, turn: _Turn) -> tuple[str, list[str]]:
        """Write one turn; returns the ids of its human message and of its tool messages."""
        human = f"t{number}-h"
        self._add(HumanMessage(turn.request, id=human))
        tools: list[str] = []
        calls = 0
        for step, (preface, batch) in enumerate(turn.cycles, start=1):
            first = calls + 1
            tool_calls = [
                ToolCall(
                    name=call.name,
                    args=dict(call.args),
                    id=f"call_t{number}_{first + offset}",
                    type="tool_call",
                )
                for offset, call in enumerate(batch)
            ]
            self._add(AIMessage(preface, id=f"t{number}-a{step}", tool_calls=tool_calls))
            for offset, call in enumerate(batch):
                calls = first + offset
                tools.append(f"t{number}-tool-{calls}")
                self._add(
                    ToolMessage(
                        call.output,
                        id=tools[-1],
                        tool_call_id=f"call_t{number}_{calls}",
                        name=call.name,
                        status="error" if call.error else "success",
                    )
                )
        self._add(AIMessage(turn.reply, id=f"t{number}-a{len(turn.cycles) + 1}"))
        return human, tools


def tool_session(seed: int = 0, *, turns: int = 300, name: str | None = None) -> Conversation:
    """A long, tool-heavy support-agent session with planted facts and questions about them.

    Deterministic for a seed. Each of the ``turns`` turns is a ``HumanMessage``, zero or more
    cycles of an ``AIMessage`` with 1 to 3 tool calls followed by one ``ToolMessage`` per call
    (in call order), and a final ``AIMessage`` with text and no tool calls. Message ids are
    ``t{turn}-h``, ``t{turn}-a{n}`` and ``t{turn}-tool-{n}``; tool call ids are
    ``call_t{turn}_{n}``. Messages are 20 seconds apart, and a new working session (a day
    later, starting 09:00 UTC) begins every 50 turns.

    About one turn in ten plants a fact (an order, ticket or invoice id, an amount, or a
    path); about one fact in four is corrected by the user at least 30 turns later, and its
    question (category ``correction``) then asks for the new value, with the old one as
    ``superseded``. Every 20 turns or so a tool returns 8,000 to 16,000 characters, some with
    a fact in the middle. 300 turns come to roughly 300,000 characters.

    Example:
        >>> conv = tool_session(seed=1, turns=12)
        >>> sum(isinstance(m, HumanMessage) for m in conv.messages)
        12
        >>> [m.id for m in conv.messages[:3]]
        ['t1-h', 't1-a1', 't1-tool-1']
        >>> q = conv.questions[0]
        >>> evidence = next(m for m in conv.messages if m.id == q.evidence[0])
        >>> q.answer in evidence.content, q.query.split()[0] in evidence.content
        (True, True)
    """
    if not 1 <= turns <= MAX_TURNS:
        raise ValueError(f"turns must be between 1 and {MAX_TURNS}, got {turns}")
    rng = random.Random(seed)

    giant_turns = [
        _TURNS_PER_GIANT * k + rng.randint(8, _TURNS_PER_GIANT - 1)
        for k in range(turns // _TURNS_PER_GIANT)
    ]
    fact_count = max(1, round(turns / _TURNS_PER_FACT))
    carrying = sorted(rng.sample(giant_turns, min(len(giant_turns) // 3, fact_count)))
    plain = _pick_turns(rng, turns, fact_count - len(carrying), set(giant_turns))
    capable = [key for key, kind in _KINDS.items() if kind.giant is not None]
    facts = [
        _Fact(_KINDS[key], turn, "giant")
        for turn, key in zip(carrying, _cycled(rng, capable, len(carrying)), strict=True)
    ] + [
        _Fact(_KINDS[key], turn, rng.choice(("said", "tool")))
        for turn, key in zip(plain, _cycled(rng, list(_KINDS), len(plain)), strict=True)
    ]
    facts.sort(key=lambda fact: fact.turn)

    subjects = _Subjects(rng)
    values: set[str] = set()
    for fact in facts:
        fact.fields = {**subjects.next(fact.kind.subject)}
        fact.fields["value"] = _new_value(rng, fact.kind.value, values)

    busy = set(giant_turns) | {fact.turn for fact in facts}
    eligible = [fact for fact in facts if fact.turn + _CORRECTION_GAP <= turns]
    rng.shuffle(eligible)
    wanted = max(2, round(len(facts) / 4))
    left = collections.Counter(fact.kind.category for fact in facts)
    corrected: list[_Fact] = []
    for fact in eligible:
        if len(corrected) < wanted and left[fact.kind.category] > 1:
            left[fact.kind.category] -= 1
            corrected.append(fact)
    for fact in sorted(corrected, key=lambda fact: fact.turn):
        later = [t for t in range(fact.turn + _CORRECTION_GAP, turns + 1) if t not in busy]
        if later:
            fact.correction_turn = rng.choice(later)
            busy.add(fact.correction_turn)
            fact.fields["new"] = _new_value(rng, fact.kind.value, values)
            fact.fields["old"] = fact.fields["value"]

    paths = [v for v in values if v.startswith("/")]
    paths.sort()
    words = _Words(rng, values, paths)
    for fact in facts:
        fact.fields = _fact_fields(words, fact)

    by_turn = {fact.turn: fact for fact in facts}
    corrections = {fact.correction_turn: fact for fact in facts if fact.correction_turn}
    giants = set(giant_turns)
    fillers = [maker for maker, _ in _FILLERS]
    weights = [weight for _, weight in _FILLERS]
    plain_giants = list(_GIANTS)

    writer = _Writer()
    for number in range(1, turns + 1):
        if (number - 1) % _TURNS_PER_SESSION == 0:
            writer.session((number - 1) // _TURNS_PER_SESSION)
        if number in by_turn:
            fact = by_turn[number]
            turn = _fact_turn(words, fact)
            human, tools = writer.turn(number, turn)
            fact.evidence = human if turn.evidence_call is None else tools[turn.evidence_call]
        elif number in corrections:
            fact = corrections[number]
            turn = _Turn(
                fact.kind.correction.format(**fact.fields), (), words.pick(_CORRECTED_REPLIES)
            )
            fact.correction_evidence = writer.turn(number, turn)[0]
        elif number in giants:
            writer.turn(number, _giant_turn(words, _GIANTS[words.pick(plain_giants)], None))
        else:
            maker = rng.choices(fillers, weights)[0]
            writer.turn(number, maker(words))
    writer.close()

    questions = [_question(fact) for fact in facts]
    return Conversation(
        name or f"tool-session-{seed}",
        writer.messages,
        writer.created_at,
        questions,
        writer.sessions,
    )


def _question(fact: _Fact) -> QAItem:
    kind, fields = fact.kind, fact.fields
    question = kind.question.format(**fields)
    if fact.correction_turn is None:
        return QAItem(
            question,
            fields["value"],
            (fact.evidence,),
            category=kind.category,
            query=kind.query.format(**fields),
        )
    return QAItem(
        question,
        fields["new"],
        (fact.correction_evidence,),
        category="correction",
        query=kind.correction_query.format(**fields),
        superseded=fields["old"],
    )
