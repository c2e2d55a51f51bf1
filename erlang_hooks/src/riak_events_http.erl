%% @doc One HTTP/1.1 POST with a whole-request deadline, over `gen_tcp'.
%%
%% Runs in a short-lived worker process spawned by the notifier, never in the put
%% path. Only the status line of the answer is read; the connection is closed after
%% it (`Connection: close'). Plain `http' only: companions listen on the node's own
%% network. No inets/httpc: no shared client process to queue behind, and nothing to
%% start inside Riak.
-module(riak_events_http).

-export([parse_url/1, post/4, request/3]).

-export_type([url/0, result/0]).

-type url() :: #{host := string(), port := inet:port_number(), path := string()}.
-type result() :: {ok, 100..599} | {error, term()}.

%% @doc Parse a base URL `http://host[:port][/prefix]' (port defaults to 80).
-spec parse_url(string() | binary()) -> {ok, url()} | {error, term()}.
parse_url(Text) ->
    case uri_string:parse(Text) of
        #{scheme := Scheme, host := Host} = U when Host =/= "", Host =/= <<>> ->
            case string:lowercase(to_list(Scheme)) of
                "http" ->
                    Path = string:trim(to_list(maps:get(path, U, "")), trailing, "/"),
                    {ok, #{host => to_list(Host), port => maps:get(port, U, 80),
                           path => Path}};
                Other ->
                    {error, {unsupported_scheme, Other}}
            end;
        #{} ->
            {error, {no_host, Text}};
        {error, _, _} = Error ->
            {error, Error}
    end.

%% @doc The request bytes: a POST of a JSON body to `Path' on `Url''s host.
-spec request(url(), string(), binary()) -> iodata().
request(#{host := Host, port := Port}, Path, Body) ->
    HostHeader = case lists:member($:, Host) of
                     true -> ["[", Host, "]"];  % IPv6 literal
                     false -> Host
                 end,
    [<<"POST ">>, Path, <<" HTTP/1.1\r\nHost: ">>, HostHeader, $:, integer_to_list(Port),
     <<"\r\nContent-Type: application/json\r\nContent-Length: ">>,
     integer_to_list(byte_size(Body)),
     <<"\r\nConnection: close\r\nUser-Agent: riak_events_hook\r\n\r\n">>, Body].

%% @doc POST `Body' to the base URL's path + `Path', giving up after `TimeoutMs' in
%% all (connect, send and the wait for the status line together).
-spec post(url(), string(), binary(), pos_integer()) -> result().
post(#{host := Host, port := Port, path := Prefix} = Url, Path, Body, TimeoutMs) ->
    Deadline = now_ms() + TimeoutMs,
    {Address, Family} = address(Host),
    Options = [binary, {active, false}, {packet, raw}, {nodelay, true},
               {send_timeout, TimeoutMs}, {send_timeout_close, true} | Family],
    case gen_tcp:connect(Address, Port, Options, TimeoutMs) of
        {ok, Socket} ->
            try exchange(Socket, request(Url, Prefix ++ Path, Body), Deadline)
            after gen_tcp:close(Socket)
            end;
        {error, Reason} ->
            {error, {connect, Reason}}
    end.

%% -- internal ----------------------------------------------------------------------

exchange(Socket, Request, Deadline) ->
    case gen_tcp:send(Socket, Request) of
        ok ->
            ok = inet:setopts(Socket, [{packet, http_bin}]),
            case gen_tcp:recv(Socket, 0, max(0, Deadline - now_ms())) of
                {ok, {http_response, _Version, Status, _Reason}} -> {ok, Status};
                {ok, Other} -> {error, {bad_response, Other}};
                {error, timeout} -> {error, timeout};
                {error, Reason} -> {error, {recv, Reason}}
            end;
        {error, timeout} ->
            {error, timeout};
        {error, Reason} ->
            {error, {send, Reason}}
    end.

address(Host) ->
    case inet:parse_address(Host) of
        {ok, {_, _, _, _} = IPv4} -> {IPv4, []};
        {ok, IPv6} -> {IPv6, [inet6]};
        {error, _} -> {Host, []}
    end.

to_list(B) when is_binary(B) -> binary_to_list(B);
to_list(L) -> L.

now_ms() -> erlang:monotonic_time(millisecond).
