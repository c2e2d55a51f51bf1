%% @doc The notifier: a locally registered gen_server that turns metadata writes into
%% POSTs to the companions, off the put path.
%%
%% <b>Lifecycle.</b> No supervisor of ours exists inside Riak, so the put path starts
%% the notifier when it finds it missing ({@link notify/3}): `gen_server:start/4',
%% not linked to the put process; the registered name makes concurrent starts safe
%% (one `init' runs, the others get `already_started'). A notifier that dies is
%% started again by the next write; what its mailbox and queue held is lost and the
%% admitted-but-unprocessed writes are counted in `lost'.
%%
%% <b>Flow.</b> The put path takes a place in the bounded backlog (counters, no
%% message) and casts `{notify, Bucket, Key, Values}'. The notifier routes the write
%% ({@link riak_events_route}), turns each node's group into a job and queues it in a
%% bounded queue; up to `max_in_flight' jobs run at once, each in a linked worker
%% process doing one POST ({@link riak_events_http}) with the `timeout_ms' deadline,
%% which the notifier also enforces by killing the worker. A companion's breaker
%% ({@link riak_events_breaker}) refuses jobs while open. Every outcome is counted
%% ({@link riak_events_stats}); failures are logged at most once per interval per
%% kind ({@link riak_events_log}). Delivery is at most once: nothing is retried.
-module(riak_events_notifier).
-behaviour(gen_server).

%% For the hook (put path).
-export([notify/3]).
%% For operators (`riak eval') and tests.
-export([status/0, start/0, stop/0, reload_config/0, idle/0]).
%% gen_server callbacks.
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-export_type([job/0]).

-define(SERVER, ?MODULE).
%% Extra time after the request deadline before a worker is killed.
-define(KILL_GRACE_MS, 200).
%% How often the backlog gauge is reset to the mailbox length (see handle_info).
-define(RECONCILE_MS, 5000).

-type job() :: #{node := node(), url := string(), target := riak_events_http:url(),
                 body := binary(), keys := pos_integer(), metadata_key := binary()}.

-record(state, {
          config :: riak_events_config:config(),
          queue :: riak_events_bqueue:bqueue(job()),
          in_flight = #{} :: #{pid() => {job(), reference()}},
          breakers = #{} :: #{string() => riak_events_breaker:breaker()}}).

%% -- put path ----------------------------------------------------------------------

%% @doc Hand a metadata write to the notifier: start it if missing, take a place in the
%% bounded backlog (or drop and count), cast. Never blocks on the notifier's work and
%% never raises for a full queue; the caller catches anything else.
%% @returns `ok', or `dropped' when the backlog was full or no notifier could start.
-spec notify(term(), binary(), [term()]) -> ok | dropped.
notify(Bucket, Key, Values) ->
    case ensure_started() of
        {ok, Pid} ->
            case riak_events_stats:try_admit() of
                true ->
                    gen_server:cast(Pid, {notify, Bucket, Key, Values});
                false ->
                    riak_events_log:warning(overflow, "queue full, dropped metadata ~s",
                                            [Key]),
                    dropped
            end;
        {error, _} ->
            dropped
    end.

%% -- operators ---------------------------------------------------------------------

%% @doc Start the notifier unless it runs (not linked to the caller).
-spec start() -> {ok, pid()} | {error, term()}.
start() -> ensure_started().

%% @doc Stop the notifier; the next write starts a new one with a fresh configuration.
-spec stop() -> ok.
stop() ->
    case whereis(?SERVER) of
        undefined -> ok;
        Pid -> gen_server:stop(Pid)
    end.

%% @doc Re-read the application environment (after `application:set_env/3' or a
%% changed advanced.config loaded by hand). `not_running' when there is no notifier:
%% the next write starts one that reads the environment anyway.
-spec reload_config() -> ok | not_running.
reload_config() ->
    case whereis(?SERVER) of
        undefined -> not_running;
        Pid -> gen_server:call(Pid, reload_config, 5000)
    end.

%% @doc Counters, gauges, the configuration and each companion's breaker, e.g.
%% `riak eval "riak_events_notifier:status()."'.
-spec status() -> #{atom() => term()}.
status() ->
    Counters = riak_events_stats:all(),
    case whereis(?SERVER) of
        undefined ->
            Counters#{running => false};
        Pid ->
            try gen_server:call(Pid, status, 5000) of
                Info -> maps:merge(Counters#{running => true}, Info)
            catch
                exit:Reason -> Counters#{running => true, status_error => Reason}
            end
    end.

%% @doc True when nothing is waiting or running: no backlog, no queued job, no POST.
-spec idle() -> boolean().
idle() ->
    riak_events_stats:value(backlog) =< 0 andalso riak_events_stats:value(queue_len) =:= 0
        andalso riak_events_stats:value(in_flight) =:= 0.

%% -- gen_server --------------------------------------------------------------------

%% @private
-spec init([]) -> {ok, #state{}}.
init([]) ->
    process_flag(trap_exit, true),
    riak_events_stats:ensure(),
    %% Writes admitted into a previous notifier's mailbox died with it.
    riak_events_stats:add(lost, max(0, riak_events_stats:value(backlog))),
    riak_events_stats:set(backlog, 0),
    riak_events_stats:set(queue_len, 0),
    riak_events_stats:set(in_flight, 0),
    riak_events_stats:incr(notifier_starts),
    Config = configure(),
    _ = erlang:send_after(?RECONCILE_MS, self(), reconcile),
    {ok, #state{config = Config,
                queue = riak_events_bqueue:new(maps:get(queue_max, Config))}}.

%% @private
-spec handle_call(term(), gen_server:from(), #state{}) -> {reply, term(), #state{}}.
handle_call(status, _From, State) ->
    {reply, #{config => State#state.config, breakers => breakers(State)}, State};
handle_call(reload_config, _From, #state{queue = Queue} = State) ->
    Config = configure(),
    Queue1 = riak_events_bqueue:set_max(maps:get(queue_max, Config), Queue),
    {reply, ok, dispatch(State#state{config = Config, queue = Queue1})};
handle_call(_Other, _From, State) ->
    {reply, {error, unknown_call}, State}.

%% @private
-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast({notify, Bucket, Key, Values}, State) ->
    State1 = try enqueue(Bucket, Key, Values, State)
             catch Class:Reason ->
                     riak_events_stats:incr(hook_errors),
                     riak_events_log:warning(hook_error, "metadata ~p: ~p:~p",
                                             [Key, Class, Reason]),
                     State
             end,
    State2 = dispatch(State1),
    %% Released only now, so that backlog + queue + in flight never reads 0 while
    %% this write is still on its way.
    riak_events_stats:release(),
    {noreply, State2};
handle_cast(_Other, State) ->
    {noreply, State}.

%% @private
-spec handle_info(term(), #state{}) -> {noreply, #state{}}.
handle_info({'EXIT', Pid, Result}, #state{in_flight = InFlight} = State) ->
    case maps:take(Pid, InFlight) of
        {{Job, Timer}, InFlight1} ->
            _ = erlang:cancel_timer(Timer),
            State1 = outcome(Job, Result, State#state{in_flight = InFlight1}),
            {noreply, dispatch(State1)};
        error ->
            {noreply, State}
    end;
handle_info({deadline, Pid}, #state{in_flight = InFlight} = State) ->
    case maps:is_key(Pid, InFlight) of
        true -> exit(Pid, kill);
        false -> ok
    end,
    {noreply, State};
handle_info(reconcile, State) ->
    %% A put that saw a dying notifier took a backlog place for a message nobody will
    %% read; the mailbox is the truth, so the gauge cannot drift for long.
    {message_queue_len, Waiting} = process_info(self(), message_queue_len),
    riak_events_stats:set(backlog, Waiting),
    _ = erlang:send_after(?RECONCILE_MS, self(), reconcile),
    {noreply, State};
handle_info(_Other, State) ->
    {noreply, State}.

%% @private
-spec terminate(term(), #state{}) -> ok.
terminate(_Reason, _State) ->
    riak_events_stats:set(queue_len, 0),
    riak_events_stats:set(in_flight, 0).

%% -- internal ----------------------------------------------------------------------

ensure_started() ->
    case whereis(?SERVER) of
        undefined ->
            case gen_server:start({local, ?SERVER}, ?MODULE, [], []) of
                {ok, Pid} -> {ok, Pid};
                {error, {already_started, Pid}} -> {ok, Pid};
                {error, _} = Error -> Error
            end;
        Pid ->
            {ok, Pid}
    end.

configure() ->
    {Config, Errors} = riak_events_config:load(),
    riak_events_log:ensure(maps:get(log_interval_ms, Config)),
    riak_events_stats:set(queue_max, maps:get(queue_max, Config)),
    [begin
         riak_events_stats:incr(config_errors),
         riak_events_log:warning(config, "bad value ~0p for ~p, using the default",
                                 [Value, Key])
     end || {Key, Value} <- Errors],
    Config.

%% Route one write and queue a job per node.
enqueue(_Bucket, Key, Values, #state{config = Config} = State) ->
    TooLarge = [V || V <- Values, is_binary(V),
                     byte_size(V) > maps:get(max_value_bytes, Config)],
    case TooLarge of
        [] -> route(Key, Values, State);
        _ -> parse_error(Key, value_too_large), State
    end.

route(Key, Values, #state{config = Config} = State) ->
    #{ring := Ring, events_bucket_type := Type, events_bucket := Bucket} = Config,
    case riak_events_ring:view(Ring, Type, Bucket) of
        {ok, View} ->
            case riak_events_route:route(Key, Values, View) of
                {ok, Routing} -> queue_groups(Key, Routing, State);
                {error, Why} -> parse_error(Key, Why), State
            end;
        {error, Why} ->
            riak_events_stats:incr(ring_errors),
            riak_events_log:warning(ring, "metadata ~s: no ring view: ~0p", [Key, Why]),
            State
    end.

queue_groups(Key, #{epoch := Epoch, dc := DC, groups := Groups,
                    unroutable := Unroutable, bad_values := Bad}, State) ->
    [parse_error(Key, Why) || Why <- Bad],
    riak_events_stats:add(unroutable_keys, length(Unroutable)),
    lists:foldl(
      fun({Node, Keys}, S) ->
              riak_events_stats:add(keys, length(Keys)),
              Body = riak_events_body:encode(Epoch, DC, Keys),
              job(Node, Key, Body, length(Keys), S)
      end, State, Groups).

job(Node, MetadataKey, Body, NKeys, #state{config = Config, queue = Queue} = State) ->
    case companion(Node, Config) of
        {ok, Url, Target} ->
            Job = #{node => Node, url => Url, target => Target, body => Body,
                    keys => NKeys, metadata_key => MetadataKey},
            case riak_events_bqueue:in(Job, Queue) of
                {ok, Queue1} ->
                    State#state{queue = Queue1};
                full ->
                    riak_events_stats:incr(dropped_groups),
                    riak_events_log:warning(overflow,
                                            "group queue full, dropped ~b keys of ~s for ~p",
                                            [NKeys, MetadataKey, Node]),
                    State
            end;
        {error, Why} ->
            riak_events_stats:incr(no_companion),
            riak_events_log:warning(no_companion, "no companion URL for ~p: ~0p",
                                    [Node, Why]),
            State
    end.

%% The companion base URL of a node: the explicit map, or http://<host>:<port>.
companion(Node, #{companion_urls := Urls, companion_port := Port}) ->
    Url = case Urls of
              #{Node := U} ->
                  U;
              #{} ->
                  case string:split(atom_to_list(Node), "@") of
                      [_, Host] when Host =/= "" -> http_url(Host, Port);
                      _ -> undefined
                  end
          end,
    case Url of
        undefined ->
            {error, {no_host, Node}};
        _ ->
            case riak_events_http:parse_url(Url) of
                {ok, Target} -> {ok, Url, Target};
                {error, _} = Error -> Error
            end
    end.

http_url(Host, Port) ->
    H = case lists:member($:, Host) of
            true -> "[" ++ Host ++ "]";
            false -> Host
        end,
    "http://" ++ H ++ ":" ++ integer_to_list(Port).

%% Start queued jobs while request slots are free.
dispatch(#state{config = Config, queue = Queue, in_flight = InFlight} = State) ->
    case map_size(InFlight) < maps:get(max_in_flight, Config) of
        true ->
            case riak_events_bqueue:out(Queue) of
                {Job, Queue1} -> dispatch(start_job(Job, State#state{queue = Queue1}));
                empty -> gauges(State)
            end;
        false ->
            gauges(State)
    end.

start_job(#{url := Url} = Job, #state{config = Config, breakers = Breakers} = State) ->
    Breaker = maps:get(Url, Breakers, riak_events_breaker:new()),
    case riak_events_breaker:allow(now_ms(), Breaker) of
        {true, Breaker1} ->
            TimeoutMs = maps:get(timeout_ms, Config),
            #{target := Target, body := Body} = Job,
            Path = maps:get(companion_path, Config),
            Pid = spawn_link(fun() ->
                                     exit({post, riak_events_http:post(Target, Path, Body,
                                                                        TimeoutMs)})
                             end),
            Timer = erlang:send_after(TimeoutMs + ?KILL_GRACE_MS, self(), {deadline, Pid}),
            State#state{in_flight = (State#state.in_flight)#{Pid => {Job, Timer}},
                        breakers = Breakers#{Url => Breaker1}};
        {false, Breaker1} ->
            riak_events_stats:incr(breaker_rejected),
            State#state{breakers = Breakers#{Url => Breaker1}}
    end.

%% Count a finished POST and feed its companion's breaker.
outcome(#{url := Url} = Job, Result, #state{breakers = Breakers, config = Config} = State) ->
    Breaker = maps:get(Url, Breakers, riak_events_breaker:new()),
    case Result of
        {post, {ok, Status}} when Status >= 200, Status < 300 ->
            riak_events_stats:incr(posted),
            State#state{breakers = Breakers#{Url => riak_events_breaker:success(Breaker)}};
        _ ->
            riak_events_stats:incr(failed),
            Why = case Result of
                      {post, {ok, Status}} -> {http_status, Status};
                      {post, {error, timeout}} -> timeout;
                      {post, {error, E}} -> E;
                      killed -> timeout;
                      Other -> {worker_crash, Other}
                  end,
            case Why of
                timeout -> riak_events_stats:incr(timeouts);
                _ -> ok
            end,
            #{node := Node, metadata_key := MKey, keys := NKeys} = Job,
            riak_events_log:warning(post_failed, "POST of ~b keys of ~s to ~p (~s) failed: ~0p",
                                    [NKeys, MKey, Node, Url, Why]),
            #{breaker_failures := K, breaker_cooldown_ms := Cooldown} = Config,
            case riak_events_breaker:failure(now_ms(), K, Cooldown, Breaker) of
                {opened, Breaker1} ->
                    riak_events_stats:incr(breaker_open),
                    riak_events_log:warning(breaker, "companion ~s of ~p: breaker open for ~b ms",
                                            [Url, Node, Cooldown]);
                {counted, Breaker1} ->
                    ok
            end,
            State#state{breakers = Breakers#{Url => Breaker1}}
    end.

parse_error(Key, Why) ->
    riak_events_stats:incr(parse_errors),
    riak_events_log:warning(parse_error, "metadata ~0p not routed: ~0p", [Key, Why]).

breakers(#state{breakers = Breakers}) ->
    maps:map(fun(_Url, B) ->
                     {S, F} = riak_events_breaker:status(B),
                     #{state => S, failures => F}
             end, Breakers).

gauges(#state{queue = Queue, in_flight = InFlight} = State) ->
    riak_events_stats:set(queue_len, riak_events_bqueue:len(Queue)),
    riak_events_stats:set(in_flight, map_size(InFlight)),
    State.

now_ms() -> erlang:monotonic_time(millisecond).
