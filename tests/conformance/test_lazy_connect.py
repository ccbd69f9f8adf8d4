"""Opening a repository does no I/O: its first call connects, on every backend.

``connect(url)`` and ``connect_async(url)`` on a server that is down return a
repository without touching the network; its first call raises the driver's
error, the same on both sides, with the URL's password nowhere in it. Input
that can be checked without I/O (a bad name) still fails at once. On the
real servers the work a repository does once (the SQL dialect told and its
warning, the tables, the Cassandra connection and table, the Neo4j
constraints, the MongoDB index) is done by the first call, once however many
threads (or tasks) make it together.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
import socket
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from chatledger import InvalidNameError, Message, connect, connect_async
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver

#: The password of every URL here; no error may show it.
SECRET = "pw-never-shown-5c1e"

BACKENDS = [
    "postgresql",
    "mariadb",
    "redis",
    "redis_cluster",
    "cassandra",
    "neo4j",
    "mongodb",
]
MODES = ["sync", "async"]

#: The adapter package each backend needs.
PACKAGES = {
    "postgresql": "chatledger_sql",
    "mariadb": "chatledger_sql",
    "redis": "chatledger_redis",
    "redis_cluster": "chatledger_redis",
    "cassandra": "chatledger_cassandra",
    "neo4j": "chatledger_neo4j",
    "mongodb": "chatledger_mongodb",
}

#: What the first call on a server that is down raises, sync and async alike:
#: that class of the driver's, or one a later release of the driver derives
#: from it (redis-py 8.2 raises ``RedisClusterUnreachableError``).
FIRST_CALL_ERRORS = {
    "postgresql": "sqlalchemy.exc.OperationalError",
    "mariadb": "sqlalchemy.exc.OperationalError",
    "redis": "redis.exceptions.ConnectionError",
    "redis_cluster": "redis.exceptions.RedisClusterException",
    "cassandra": "cassandra.cluster.NoHostAvailable",
    "neo4j": "neo4j.exceptions.ServiceUnavailable",
    "mongodb": "pymongo.errors.ServerSelectionTimeoutError",
}

#: An option each backend refuses by its name alone.
BAD_NAMES: dict[str, dict[str, Any]] = {
    "postgresql": {"table_name": "no such; table"},
    "mariadb": {"table_name": "no such; table"},
    "redis": {"key_prefix": "no spaces"},
    "redis_cluster": {"key_prefix": "no spaces"},
    "cassandra": {"table": "no-such"},
    "neo4j": {"conversation_label": "no label"},
    "mongodb": {"collection": "no$such"},
}


def _needs_adapter(backend: str) -> None:
    package = PACKAGES[backend]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, read, closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class CountedPort:
    """A loopback port that counts the connections made to it, closing each at once.

    A client that connects meets a server that hangs up, so it fails fast
    instead of waiting for a greeting.
    """

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.number: int = self._socket.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                accepted, _ = self._socket.accept()
            except OSError:
                return  # closed
            self.connections += 1
            accepted.close()

    def close(self) -> None:
        # shutdown wakes the accept() that close() alone would leave blocked.
        with suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        self._thread.join(timeout=10)


@contextmanager
def counted_port() -> Iterator[CountedPort]:
    port = CountedPort()
    try:
        yield port
    finally:
        port.close()


def _down(backend: str, mode: str, port: int) -> tuple[str, dict[str, Any]]:
    """A URL (with a password) and options for ``backend`` on ``port`` of loopback."""
    login = f"chat:{SECRET}@127.0.0.1:{port}"
    if backend == "postgresql":
        return f"postgresql+psycopg://{login}/chat", {}
    if backend == "mariadb":
        driver = "pymysql" if mode == "sync" else "asyncmy"
        return f"mysql+{driver}://{login}/chat", {}
    if backend == "redis":
        return f"redis://{login}/0", {}
    if backend == "redis_cluster":
        return f"redis+cluster://{login}/0", {}
    if backend == "cassandra":
        return f"cassandra://{login}/chat", {}
    if backend == "neo4j":
        # The driver's retries of a failed transaction would take 30 s.
        return f"bolt://{login}", {"max_transaction_retry_time": 0}
    return f"mongodb://{login}/chat", {"serverSelectionTimeoutMS": 500}


def _on_server(
    backend: str, mode: str, required: set[str]
) -> tuple[str, dict[str, Any]]:
    """The test server's URL for ``backend`` and options naming a fresh namespace."""
    tag = uuid.uuid4().hex[:12]
    if backend in ("postgresql", "mariadb"):
        url = backend_url(backend, required)
        if mode == "async" and backend == "mariadb":
            url = with_driver(url, "asyncmy")
        return url, {"table_name": f"lazy_{tag}"}
    if backend in ("redis", "redis_cluster"):
        url = backend_url(backend, required)
        return url, {"key_prefix": f"lazy{tag}:", "cluster": backend == "redis_cluster"}
    if backend == "cassandra":
        url = backend_url(backend, required)
        return url, {"table": f"lazy_{tag}", "create_keyspace": True}
    if backend == "neo4j":
        url = backend_url(backend, required)
        return url, {
            "conversation_label": f"ConversationL{tag}",
            "message_label": f"MessageL{tag}",
        }
    return backend_url(backend, required), {"collection": f"lazy_{tag}"}


def _open(mode: str, url: str, options: dict[str, Any]) -> Any:
    return (connect if mode == "sync" else connect_async)(url, **options)


class Caller:
    """Runs a repository's calls, sync or async: the async ones on one event loop."""

    def __init__(self, mode: str) -> None:
        self._runner = asyncio.Runner() if mode == "async" else None

    def __call__(self, result: Any) -> Any:
        """``result`` itself, or what the coroutine ``result`` returns."""
        return result if self._runner is None else self._runner.run(result)

    def close(self, repository: Any) -> None:
        """Close ``repository``, then the loop."""
        if self._runner is None:
            repository.close()
            return
        try:
            self._runner.run(repository.aclose())
        finally:
            self._runner.close()


def _first_call_failure(mode: str, repository: Any) -> BaseException:
    """What the repository's first call raised; the repository is closed after."""
    caller = Caller(mode)
    try:
        with pytest.raises(Exception) as raised:
            caller(repository.find_conversation_ids())
    finally:
        caller.close(repository)
    return raised.value


def _qualified(error: BaseException) -> str:
    return f"{type(error).__module__}.{type(error).__qualname__}"


def _chain_text(error: BaseException | None) -> str:
    """str and repr of ``error`` and of every error it came from."""
    texts = []
    while error is not None:
        texts += [str(error), repr(error)]
        error = error.__cause__ or error.__context__
    return "\n".join(texts)


def _at_once(call: Callable[[], object], threads: int = 2) -> None:
    """Run ``call`` in ``threads`` threads released together; raise a failure."""
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            start.wait()
            call()
        except BaseException as error:  # raised below, in the test's thread
            failures.append(error)

    started = [threading.Thread(target=run) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in started), "a first call hung"
    if failures:
        raise failures[0]


def _race(mode: str, caller: Caller, call: Callable[[], Any]) -> None:
    """Two first calls at once: in two threads (sync), or two tasks on one loop."""
    if mode == "sync":
        _at_once(call)
        return

    async def both() -> None:
        await asyncio.gather(call(), call())

    caller(both())


# -- a server that is down ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_opening_on_a_server_that_is_down_touches_no_network(
    backend: str, mode: str
) -> None:
    _needs_adapter(backend)
    with counted_port() as port:
        url, options = _down(backend, mode, port.number)
        repository = _open(mode, url, options)
        assert port.connections == 0
        Caller(mode).close(repository)
        assert port.connections == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_call_on_a_server_that_is_down_raises_the_drivers_error(
    backend: str,
) -> None:
    """The same error sync and async, without the URL's password."""
    _needs_adapter(backend)
    port = _closed_port()
    module, _, name = FIRST_CALL_ERRORS[backend].rpartition(".")
    expected = getattr(importlib.import_module(module), name)
    raised = set()
    for mode in MODES:
        url, options = _down(backend, mode, port)
        repository = _open(mode, url, options)  # no error: nothing is sent yet
        error = _first_call_failure(mode, repository)
        assert isinstance(error, expected), (mode, error)
        assert SECRET not in _chain_text(error)
        raised.add(_qualified(error))
    assert len(raised) == 1, raised


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bad_name_still_fails_when_opening_before_any_io(
    backend: str, mode: str
) -> None:
    _needs_adapter(backend)
    with counted_port() as port:
        url, options = _down(backend, mode, port.number)
        with pytest.raises(InvalidNameError):
            _open(mode, url, {**options, **BAD_NAMES[backend]})
        assert port.connections == 0


# -- the real servers -----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_opened_on_the_server_it_works_from_the_first_call(
    backend: str, mode: str, required: set[str]
) -> None:
    _needs_adapter(backend)
    url, options = _on_server(backend, mode, required)
    repository = _open(mode, url, options)
    call = Caller(mode)
    try:
        call(repository.save_all("c1", [Message.user("hello")]))
        stored = call(repository.find_by_conversation_id("c1"))
        assert [m.content for m in stored] == ["hello"]
        call(repository.drop_schema())
    finally:
        call.close(repository)


def _counting_statements(table: str) -> Any:
    """Note every CREATE TABLE statement naming ``table`` that any engine sends."""
    from sqlalchemy import Engine, event

    created: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("CREATE TABLE") and table in statement:
            created.append(statement)

    event.listen(Engine, "before_cursor_execute", note)
    return created, lambda: event.remove(Engine, "before_cursor_execute", note)


def _sql_first_calls(
    backend: str, mode: str, required: set[str], *, racing: bool
) -> tuple[int, Any]:
    """How many CREATE TABLE statements the first call(s) sent, and the dialect."""
    url, options = _on_server(backend, mode, required)
    created, stop = _counting_statements(options["table_name"])
    repository = _open(mode, url, options)
    try:
        assert created == []  # not when opening
        if not racing:
            first = repository.find_conversation_ids()
            if mode == "async":
                asyncio.run(first)
        elif mode == "sync":
            _at_once(repository.find_conversation_ids)
        else:
            # Two event loops in two threads: the async SQL repository serves any.
            _at_once(lambda: asyncio.run(repository.find_conversation_ids()))
        count, dialect = len(created), repository.dialect
        if mode == "sync":
            repository.drop_schema()
            repository.close()
        else:

            async def finish() -> None:
                await repository.drop_schema()
                await repository.aclose()

            asyncio.run(finish())
    finally:
        stop()
    return count, dialect


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_sql_first_calls_in_two_threads_create_the_tables_once(
    backend: str, mode: str, required: set[str]
) -> None:
    _needs_adapter(backend)
    alone, _ = _sql_first_calls(backend, mode, required, racing=False)
    raced, _ = _sql_first_calls(backend, mode, required, racing=True)
    assert alone > 0
    assert raced == alone


@pytest.mark.parametrize("mode", MODES)
def test_mariadb_behind_a_mysql_url_is_told_by_the_first_call_once(
    mode: str, required: set[str]
) -> None:
    """The product is only known after connecting: the first call tells it, once,
    and an explicit dialect for another product warns once, then."""
    _needs_adapter("mariadb")
    from chatledger_sql.dialects import DialectMismatchWarning, MySQLDialect

    url, options = _on_server("mariadb", mode, required)
    assert url.startswith("mysql+")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        repository = _open(mode, url, {**options, "dialect": "mysql"})
        assert repository.dialect is None
        assert caught == []
        if mode == "sync":
            _at_once(repository.find_conversation_ids)
        else:
            _at_once(lambda: asyncio.run(repository.find_conversation_ids()))
    mismatches = [w for w in caught if issubclass(w.category, DialectMismatchWarning)]
    assert len(mismatches) == 1, [str(w.message) for w in caught]
    assert "'mariadb'" in str(mismatches[0].message)
    assert isinstance(repository.dialect, MySQLDialect)
    caller = Caller(mode)
    caller(repository.drop_schema())
    caller.close(repository)


def _cluster_nodes_mapped(mode: str, required: set[str], *, racing: bool) -> int:
    """How often the cluster client asked ``address_remap`` to map a node.

    A ``RedisCluster`` maps each node's address as it learns the cluster's
    layout, which it does as it is made (sync) or on its first command
    (asyncio): a second client made for the same repository maps them again.
    """
    mapped: list[tuple[str, int]] = []

    def remap(address: tuple[str, int]) -> tuple[str, int]:
        mapped.append(address)
        return address

    url, options = _on_server("redis_cluster", mode, required)
    caller = Caller(mode)
    repository = _open(mode, url, {**options, "address_remap": remap})
    try:
        assert mapped == []  # nothing learnt when opening
        if racing:
            _race(mode, caller, repository.find_conversation_ids)
        else:
            caller(repository.find_conversation_ids())
    finally:
        caller.close(repository)
    return len(mapped)


@pytest.mark.parametrize("mode", MODES)
def test_redis_cluster_first_calls_at_once_make_one_client(
    mode: str, required: set[str]
) -> None:
    _needs_adapter("redis_cluster")
    alone = _cluster_nodes_mapped(mode, required, racing=False)
    raced = _cluster_nodes_mapped(mode, required, racing=True)
    assert alone > 0
    assert raced == alone


def _open_clusters() -> int:
    """How many cassandra-driver clusters in this process are not shut down."""
    from cassandra.cluster import Cluster

    gc.collect()
    # type(), not isinstance(): the driver keeps weakref proxies of a cluster.
    return sum(1 for o in gc.get_objects() if type(o) is Cluster and not o.is_shutdown)


@pytest.mark.parametrize("mode", MODES)
def test_cassandra_first_calls_at_once_connect_and_make_the_table_once(
    mode: str, required: set[str]
) -> None:
    _needs_adapter("cassandra")
    url, options = _on_server("cassandra", mode, required)
    before = _open_clusters()
    repository = _open(mode, url, options)
    caller = Caller(mode)
    try:
        assert _open_clusters() == before
        _race(mode, caller, repository.find_conversation_ids)
        assert _open_clusters() == before + 1
        caller(repository.save_all("c1", [Message.user("hello")]))
        assert caller(repository.find_conversation_ids()) == ["c1"]
        caller(repository.drop_schema())
    finally:
        caller.close(repository)
    assert _open_clusters() == before


@pytest.mark.parametrize("mode", MODES)
def test_cassandra_a_missing_keyspace_is_named_by_the_first_call(
    mode: str, required: set[str]
) -> None:
    _needs_adapter("cassandra")
    from chatledger import StoreNotFoundError

    url, _ = _on_server("cassandra", mode, required)
    keyspace = f"absent_{uuid.uuid4().hex[:12]}"
    missing = url.rsplit("/", 1)[0] + f"/{keyspace}"
    repository = _open(mode, missing, {})  # no error yet: nothing is sent
    error = _first_call_failure(mode, repository)
    assert isinstance(error, StoreNotFoundError)
    assert f"keyspace {keyspace!r} does not exist" in str(error)
    assert "create_keyspace=True" in str(error)


class _Noted(logging.Handler):
    """Keeps the messages of the records it handles."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _neo4j_schema_statements(mode: str, required: set[str], *, racing: bool) -> int:
    """How many CREATE statements on the fresh labels the first call(s) sent.

    The driver logs every message it sends at DEBUG (``C: RUN '<query>'``).
    """
    url, options = _on_server("neo4j", mode, required)
    label = options["conversation_label"]
    logger = logging.getLogger("neo4j")
    noted, level = _Noted(), logger.level
    logger.addHandler(noted)
    logger.setLevel(logging.DEBUG)
    caller = Caller(mode)
    repository = _open(mode, url, options)
    try:
        assert [m for m in noted.messages if " C: " in m] == []  # nothing sent yet
        if racing:
            _race(mode, caller, repository.find_conversation_ids)
        else:
            caller(repository.find_conversation_ids())
        sent = [
            m for m in noted.messages if "C: RUN 'CREATE" in m and f"`{label}`" in m
        ]
        caller(repository.drop_schema())
    finally:
        logger.removeHandler(noted)
        logger.setLevel(level)
        caller.close(repository)
    return len(sent)


@pytest.mark.parametrize("mode", MODES)
def test_neo4j_first_calls_at_once_create_the_schema_once(
    mode: str, required: set[str]
) -> None:
    _needs_adapter("neo4j")
    alone = _neo4j_schema_statements(mode, required, racing=False)
    raced = _neo4j_schema_statements(mode, required, racing=True)
    assert alone > 0
    assert raced == alone


def _mongodb_index_commands(mode: str, required: set[str], *, racing: bool) -> int:
    """How many createIndexes commands the first write(s) sent."""
    from pymongo import monitoring

    class Commands(monitoring.CommandListener):
        def __init__(self) -> None:
            self.names: list[str] = []

        def started(self, event: monitoring.CommandStartedEvent) -> None:
            self.names.append(event.command_name)

        def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
            pass

        def failed(self, event: monitoring.CommandFailedEvent) -> None:
            pass

    url, options = _on_server("mongodb", mode, required)
    commands = Commands()
    caller = Caller(mode)
    repository = _open(mode, url, {**options, "event_listeners": [commands]})
    try:
        assert commands.names == []

        def write() -> Any:
            return repository.save_all(f"c{uuid.uuid4().hex}", [Message.user("hi")])

        if racing:
            _race(mode, caller, write)
        else:
            caller(write())
        caller(repository.drop_schema())
    finally:
        caller.close(repository)
    return commands.names.count("createIndexes")


@pytest.mark.parametrize("mode", MODES)
def test_mongodb_first_writes_at_once_create_the_index_once(
    mode: str, required: set[str]
) -> None:
    _needs_adapter("mongodb")
    assert _mongodb_index_commands(mode, required, racing=False) == 1
    assert _mongodb_index_commands(mode, required, racing=True) == 1
