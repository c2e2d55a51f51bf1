%% @doc The shared breaker vectors (tests/vectors/hook_breaker.json): riak_events_breaker
%% must give each step's result, state and failure count. The devnode's Python twin
%% (devnode/breaker.py) reads the same file (tests/unit/devnode/test_riak_hook_breaker.py).
-module(riak_events_breaker_vectors_tests).

-include("riak_events_test.hrl").

-define(B, riak_events_breaker).

%% Next to the ring vectors, whose path the Makefile passes in RIAK_EVENTS_VECTORS.
path() ->
    Dir = case os:getenv("RIAK_EVENTS_VECTORS") of
              false -> "../tests/vectors";
              RingVectors -> filename:dirname(RingVectors)
          end,
    filename:join(Dir, "hook_breaker.json").

cases() ->
    maps:get(<<"cases">>, riak_events_json_reader:file(path())).

%% One step: the event at its time, its result, and the breaker after it.
step(#{<<"at_ms">> := Now, <<"event">> := <<"allow">>}, _K, _C, B) ->
    {Allowed, B1} = ?B:allow(Now, B),
    {Allowed, B1};
step(#{<<"event">> := <<"success">>}, _K, _C, B) ->
    {null, ?B:success(B)};
step(#{<<"at_ms">> := Now, <<"event">> := <<"failure">>}, K, C, B) ->
    {Outcome, B1} = ?B:failure(Now, K, C, B),
    {atom_to_binary(Outcome, utf8), B1}.

run(#{<<"breaker_failures">> := K, <<"breaker_cooldown_ms">> := C, <<"steps">> := Steps}) ->
    lists:foldl(
      fun(Step, {I, B}) ->
              {Result, B1} = step(Step, K, C, B),
              {State, Failures} = ?B:status(B1),
              #{<<"result">> := WantResult, <<"state">> := WantState,
                <<"failures">> := WantFailures} = Step,
              ?assertEqual({I, WantResult, WantState, WantFailures},
                           {I, Result, atom_to_binary(State, utf8), Failures}),
              {I + 1, B1}
      end, {1, ?B:new()}, Steps).

all_cases_test_() ->
    Cases = cases(),
    [?_assert(length(Cases) >= 5)
     | [{binary_to_list(maps:get(<<"name">>, Case)), fun() -> run(Case) end}
        || Case <- Cases]].
