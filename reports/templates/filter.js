{#- Filters the summary table by a substring of the row's text (big campaigns have hundreds of signatures) and shows how many rows match. -#}
(function(){var box=document.getElementById('filter'),n=document.getElementById('shown');
var rows=document.querySelectorAll('#findings tr.finding');
function apply(){var q=box.value.toLowerCase(),k=0;rows.forEach(function(r){
var on=r.textContent.toLowerCase().indexOf(q)>=0;r.style.display=on?'':'none';k+=on;});
n.textContent=k+' of '+rows.length+' shown';}
box.addEventListener('input',apply);apply();})();
