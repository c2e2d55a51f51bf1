%% @doc Counters and gauges of the hook, readable from any process.
%%
%% One `counters' array kept in `persistent_term', created once by the notifier and
%% kept across notifier restarts, so counts survive a crash of the notifier and the
%% put path can update them without messages or locks. Before the array exists every
%% update is a no-op.
%%
%% The same array holds the admission gauge of the bounded queue in front of the
%% notifier ({@link try_admit/0}).
-module(riak_events_stats).

%% For the notifier.
-export([ensure/0, set/2]).
%% For the put path and the notifier.
-export([incr/1, add/2, try_admit/0, release/0]).
%% For operators and tests.
-export([value/1, all/0, names/0]).

-export_type([name/0]).

-type name() ::
        %% counters
        received | dropped | tombstones | hook_errors | parse_errors | config_errors
      | ring_errors | keys | unroutable_keys | no_companion | dropped_groups | posted | failed
      | timeouts | breaker_open | breaker_rejected | notifier_starts | lost
        %% gauges
      | backlog | queue_len | in_flight | queue_max.
%% Counters (only grow):
%% <ul>
%% <li>`received': metadata writes admitted to the notifier's queue.</li>
%% <li>`dropped': writes refused because the queue was full.</li>
%% <li>`tombstones': deletes (all siblings tombstones) skipped.</li>
%% <li>`hook_errors': exceptions caught in the put path.</li>
%% <li>`parse_errors': metadata keys or sibling values that did not parse.</li>
%% <li>`config_errors': settings replaced by their defaults.</li>
%% <li>`ring_errors': writes not routed because the ring could not be read (e.g. the
%%     events bucket type does not exist).</li>
%% <li>`keys': chunk keys routed to a node; `unroutable_keys': keys whose whole
%%     preflist is down.</li>
%% <li>`no_companion': groups for a node without a usable companion URL.</li>
%% <li>`dropped_groups': groups refused because the group queue was full.</li>
%% <li>`posted': POSTs answered 2xx; `failed': all other outcomes (of which
%%     `timeouts' hit the deadline).</li>
%% <li>`breaker_open': times a companion's breaker opened; `breaker_rejected': groups
%%     not sent because their companion's breaker was open.</li>
%% <li>`notifier_starts': notifier process starts; `lost': admitted writes that died
%%     unprocessed with a notifier process.</li>
%% </ul>
%% Gauges: `backlog' (writes cast, not yet taken), `queue_len' (groups waiting),
%% `in_flight' (POSTs running), `queue_max' (the admission bound).

-define(KEY, {?MODULE, counters}).

%% @doc The names, in the order of the array.
-spec names() -> [name()].
names() ->
    [received, dropped, tombstones, hook_errors, parse_errors, config_errors,
     ring_errors, keys, unroutable_keys, no_companion, dropped_groups, posted, failed,
     timeouts, breaker_open, breaker_rejected, notifier_starts, lost,
     backlog, queue_len, in_flight, queue_max].

%% @doc Create the array unless it exists (or has another size). Called by the notifier's `init', which runs
%% in one process at a time (the registered name is taken before `init' runs).
-spec ensure() -> ok.
ensure() ->
    Size = length(names()),
    case persistent_term:get(?KEY, undefined) of
        undefined ->
            persistent_term:put(?KEY, counters:new(Size, [write_concurrency]));
        Ref ->
            case counters:info(Ref) of
                #{size := Size} ->
                    ok;
                #{} ->
                    %% A new version of this module with other names: start over.
                    persistent_term:put(?KEY, counters:new(Size, [write_concurrency]))
            end
    end.

%% @doc Add one to a counter.
-spec incr(name()) -> ok.
incr(Name) -> add(Name, 1).

%% @doc Add `N' to a counter.
-spec add(name(), integer()) -> ok.
add(_Name, 0) -> ok;
add(Name, N) ->
    case ref() of
        undefined -> ok;
        Ref -> counters:add(Ref, index(Name), N)
    end.

%% @doc Set a gauge.
-spec set(name(), integer()) -> ok.
set(Name, N) ->
    case ref() of
        undefined -> ok;
        Ref -> counters:put(Ref, index(Name), N)
    end.

%% @doc Current value of a counter or gauge (0 before the array exists).
-spec value(name()) -> integer().
value(Name) ->
    case ref() of
        undefined -> 0;
        Ref -> counters:get(Ref, index(Name))
    end.

%% @doc Every counter and gauge.
-spec all() -> #{name() => integer()}.
all() -> maps:from_list([{N, value(N)} || N <- names()]).

%% @doc Take a place in the bounded queue in front of the notifier: `true' and the
%% `backlog' gauge grows by one, or `false' (counted in `dropped') when `backlog'
%% already reached `queue_max'. Lock-free; concurrent callers can overshoot the bound
%% by at most their own number.
-spec try_admit() -> boolean().
try_admit() ->
    case ref() of
        undefined ->
            false;
        Ref ->
            Backlog = index(backlog),
            counters:add(Ref, Backlog, 1),
            case counters:get(Ref, Backlog) =< counters:get(Ref, index(queue_max)) of
                true ->
                    counters:add(Ref, index(received), 1),
                    true;
                false ->
                    counters:sub(Ref, Backlog, 1),
                    counters:add(Ref, index(dropped), 1),
                    false
            end
    end.

%% @doc Give back a place taken with {@link try_admit/0} (the notifier took the write).
-spec release() -> ok.
release() -> add(backlog, -1).

%% -- internal ----------------------------------------------------------------------

ref() -> persistent_term:get(?KEY, undefined).

index(Name) -> index(Name, names(), 1).

index(Name, [Name | _], I) -> I;
index(Name, [_ | Rest], I) -> index(Name, Rest, I + 1).
